package outbox

import (
	"context"
	"testing"
	"time"
)

// Snapshot.OldestSent is the age of the oldest SENT row, 0 without one, and a SENT row without
// sent_at does not fail Stats.
func TestStatsOldestSent(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	if s, err := Stats(ctx, db); err != nil || s.OldestSent != 0 {
		t.Fatalf("empty table: OldestSent %s, %v; want 0", s.OldestSent, err)
	}
	ids := enqueueN(t, db.DB, "sent_age", 3)
	setRow(t, db, ids[0], sentSQL, -7200)
	setRow(t, db, ids[1], sentSQL, -600)
	s, err := Stats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s.OldestSent < 2*time.Hour || s.OldestSent > 2*time.Hour+time.Minute {
		t.Errorf("OldestSent = %s, want about 2h", s.OldestSent)
	}
	// Changed by hand: SENT without sent_at, due first.
	setRow(t, db, ids[2], "status='SENT', sent_at=NULL, next_attempt_at=TIMESTAMPADD(HOUR, -3, UTC_TIMESTAMP(6))")
	if s, err = Stats(ctx, db); err != nil || s.OldestSent < 3*time.Hour || s.OldestSent > 3*time.Hour+time.Minute {
		t.Errorf("with a SENT row without sent_at: OldestSent %s, %v; want about 3h", s.OldestSent, err)
	}
}

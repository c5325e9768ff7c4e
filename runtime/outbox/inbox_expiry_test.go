package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// keyRow sets an outbox_inbox row by hand: its processed_at secsAgo seconds ago and its
// expires_at as the SQL expression exp ("NULL" for a key of an older worker).
func keyRow(t testing.TB, db *sql.DB, consumer, key string, secsAgo int, exp string) {
	t.Helper()
	_, err := db.Exec("INSERT INTO outbox_inbox (consumer, idem_key, processed_at, expires_at) VALUES (?, ?, TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), "+exp+")",
		consumer, key, -secsAgo)
	if err != nil {
		t.Fatalf("insert key %s/%s: %v", consumer, key, err)
	}
}

func keyExists(t testing.TB, db *sql.DB, consumer, key string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_inbox WHERE consumer = ? AND idem_key = ?", consumer, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// keptFor is a key's expires_at - processed_at, or -1 when expires_at is NULL.
func keptFor(t testing.TB, db *sql.DB, consumer, key string) time.Duration {
	t.Helper()
	var us sql.NullInt64
	if err := db.QueryRow("SELECT TIMESTAMPDIFF(MICROSECOND, processed_at, expires_at) FROM outbox_inbox WHERE consumer = ? AND idem_key = ?", consumer, key).Scan(&us); err != nil {
		t.Fatal(err)
	}
	if !us.Valid {
		return -1
	}
	return time.Duration(us.Int64) * time.Microsecond
}

// A key Once records in a handler is kept for max(7d, the handler's redelivery window) and
// outside a handler for 7d. The cleaner deletes a key only once its own expiry passed, whatever
// the cleaning worker's Retention.Inbox: a key inside its window stays though it is older than
// that. A key without expiry, written by an older worker, goes after max(7d, Inbox).
func TestInboxKeysExpire(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()

	// A handler whose policy retries for about two weeks records a key.
	long := Policy{MaxAttempts: 30, Backoff: Backoff{Initial: time.Second, Max: 24 * time.Hour}}
	recorded := make(chan error, 1)
	r := NewRouter()
	r.Handle("inbox_long", long, func(ctx context.Context, _ json.RawMessage, d Delivery) error {
		recorded <- InTx(ctx, db.DB, func(tx *sql.Tx) error {
			_, err := Once(ctx, tx, "long", "in-window")
			return err
		})
		return nil
	})
	cfg := fastConfig(Config{})
	w := newTestWorker(t, db.DB, r, cfg)
	stop := start(t, w)
	enqueueN(t, db.DB, "inbox_long", 1)
	select {
	case err := <-recorded:
		if err != nil {
			t.Fatalf("Once in the handler: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not run")
	}
	stop()
	window := redeliveryWindow(long.WithDefaults(), cfg.withDefaults())
	if window <= DefaultRetentionInbox {
		t.Fatalf("window %s is not over 7d", window)
	}
	if got := keptFor(t, db.DB, "long", "in-window"); got != window {
		t.Errorf("key recorded in the handler is kept %s, want its window %s", got, window)
	}
	// Outside a handler: the default.
	if _, err := Once(ctx, db, "plain", "k"); err != nil {
		t.Fatal(err)
	}
	if got := keptFor(t, db.DB, "plain", "k"); got != DefaultRetentionInbox {
		t.Errorf("key recorded outside a handler is kept %s, want %s", got, DefaultRetentionInbox)
	}

	// Eight days on, the long key is older than 7d and than the cleaner's 1h, yet in its window.
	if _, err := db.Exec("UPDATE outbox_inbox SET processed_at = TIMESTAMPADD(DAY, -8, processed_at), expires_at = TIMESTAMPADD(DAY, -8, expires_at) WHERE consumer = 'long'"); err != nil {
		t.Fatal(err)
	}
	keyRow(t, db.DB, "c", "expired", 3600, "TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))")
	keyRow(t, db.DB, "c", "future", 30*86400, "TIMESTAMPADD(DAY, 1, UTC_TIMESTAMP(6))")
	keyRow(t, db.DB, "old", "8d", 8*86400, "NULL")
	keyRow(t, db.DB, "old", "6d", 6*86400, "NULL")

	// The cleaner's own handler has a window under an hour, so Inbox 1h is accepted.
	cr := NewRouter()
	cr.Handle("inbox_short", Policy{MaxAttempts: 1, Timeout: time.Second}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	cleaner := newTestWorker(t, db.DB, cr, Config{StaleAfter: time.Minute, ReclaimInterval: 50 * time.Millisecond, Retention: Retention{Inbox: time.Hour}})
	s := signals(t, cleaner)
	start(t, cleaner)
	if p := awaitRetained(t, s); p.Inbox != 2 {
		t.Errorf("pass = %+v, want 2 keys deleted (the expired one and the 8-day-old one without expiry)", p)
	}
	for _, k := range [][2]string{{"c", "expired"}, {"old", "8d"}} {
		if keyExists(t, db.DB, k[0], k[1]) {
			t.Errorf("key %s/%s kept, want it deleted", k[0], k[1])
		}
	}
	for _, k := range [][2]string{{"long", "in-window"}, {"plain", "k"}, {"c", "future"}, {"old", "6d"}} {
		if !keyExists(t, db.DB, k[0], k[1]) {
			t.Errorf("key %s/%s deleted, want it kept", k[0], k[1])
		}
	}
}

// NewWorker refuses an explicit Retention.Inbox shorter than the redelivery window of one of
// its router's types, naming the field, the window and the type, and accepts one as long.
func TestNewWorkerRefusesShortRetentionInbox(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	r := NewRouter()
	r.Handle("inbox_quick", Policy{MaxAttempts: 1}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	r.Handle("inbox_patient", Policy{MaxAttempts: 15}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	cfg := fastConfig(Config{Retention: Retention{Inbox: 2 * time.Hour}})
	window := redeliveryWindow(Policy{MaxAttempts: 15}.WithDefaults(), cfg.withDefaults())
	if window <= 2*time.Hour {
		t.Fatalf("window %s is not over 2h", window)
	}
	_, err := NewWorker(db.DB, r, cfg)
	if err == nil {
		t.Fatal("NewWorker accepted Retention.Inbox 2h under a window of " + window.String())
	}
	for _, s := range []string{"Config.Retention.Inbox 2h0m0s", "redelivery window " + window.String(), `"inbox_patient"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("NewWorker error %q does not name %q", err, s)
		}
	}
	cfg.Retention.Inbox = window
	if _, err := NewWorker(db.DB, r, cfg); err != nil {
		t.Errorf("NewWorker with Retention.Inbox = the window: %v", err)
	}
}

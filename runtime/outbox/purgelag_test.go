package outbox

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

// A session holding a consistent snapshot is seen: the oldest transaction is at least as old as
// it, and named while it is the oldest. Once it ends, it is no longer reported.
func TestReadPurgeLagSeesAnOpenSnapshot(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	holder, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var holderID int64
	if err := holder.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&holderID); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	// trx_started has whole seconds, so the age is checked once two seconds have passed.
	// On MySQL a test beside this one that runs a statement with an emoji makes the
	// transactions unreadable for that moment, so such a read is retried.
	var lag PurgeLag
	last := time.Time{}
	testutil.Eventually(t, 60*time.Second, "the open snapshot reported at least 1s old", func() bool {
		if time.Since(opened) < 2*time.Second || time.Since(last) < 200*time.Millisecond {
			return false
		}
		last = time.Now()
		if lag, err = ReadPurgeLag(ctx, d.DB); err != nil {
			t.Fatal(err)
		}
		return lag.Known && !lag.TransactionsUnreadable && lag.OldestTransaction >= time.Since(opened)-time.Second
	})
	if lag.OldestTransaction < time.Second || lag.HistoryLength < 0 {
		t.Errorf("ReadPurgeLag = %+v, want an oldest transaction of at least 1s", lag)
	}
	if lag.ThreadID == holderID && (lag.User == "" || lag.Host == "") {
		t.Errorf("ReadPurgeLag named the holder without its user and host: %+v", lag)
	}
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// InnoDB refreshes what INNODB_TRX shows only when it was last read over 100 ms ago. Reads
	// every 5 ms would see the same rows forever.
	last = time.Now()
	testutil.Eventually(t, 60*time.Second, "the committed snapshot no longer reported", func() bool {
		if time.Since(last) < 200*time.Millisecond {
			return false
		}
		last = time.Now()
		if lag, err = ReadPurgeLag(ctx, d.DB); err != nil || !lag.Known {
			t.Fatalf("after COMMIT: ReadPurgeLag = %+v, %v", lag, err)
		}
		return !lag.TransactionsUnreadable && lag.ThreadID != holderID
	})
}

// A user without PROCESS gets Known false and no error, so status keeps working for it.
func TestReadPurgeLagWithoutProcessPrivilege(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	db, err := sql.Open("mysql", d.User(t, "App-Pw-7f3a", "SELECT, INSERT, UPDATE, DELETE"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lag, err := ReadPurgeLag(context.Background(), db)
	if err != nil || lag.Known {
		t.Errorf("ReadPurgeLag without PROCESS = %+v, %v; want not known and no error", lag, err)
	}
}

// A session running a statement with an emoji does not break the read. MySQL cannot list the
// transactions then, and says so, while MariaDB lists them.
func TestReadPurgeLagBesideAnEmojiStatement(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	ctx := context.Background()
	holder, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var s string
		var n int
		done <- holder.QueryRowContext(ctx, "SELECT '\U0001F600 café', SLEEP(3)").Scan(&s, &n)
	}()
	last := time.Time{}
	testutil.Eventually(t, 10*time.Second, "the emoji statement's transaction reported", func() bool {
		if time.Since(last) < 200*time.Millisecond {
			return false
		}
		last = time.Now()
		lag, err := ReadPurgeLag(ctx, d.DB)
		if err != nil || !lag.Known {
			t.Fatalf("ReadPurgeLag beside an emoji statement = %+v, %v; want no error", lag, err)
		}
		return lag.ThreadID != 0 || lag.TransactionsUnreadable
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
}

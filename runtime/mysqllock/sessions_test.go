package mysqllock

import (
	"context"
	"strconv"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// The tests that look at the server's sessions must not depend on what other sessions run,
// such as another package's test on the same server running a statement that holds an emoji.
func TestSessionReadsIgnoreOtherSessionsText(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	other := testdb.New(t)
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var busy int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&busy); err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, "SELECT SLEEP(30), '\U0001F600'")
		slept <- err
	}()
	defer func() {
		other.MustExec(t, "KILL QUERY "+strconv.FormatInt(busy, 10))
		<-slept
	}()
	waitRunning(t, d.DB, busy, "SELECT SLEEP")

	if ids := lockWaiters(t, d); len(ids) != 0 {
		t.Fatalf("GET_LOCK waiters %v in a database where nothing waits", ids)
	}
	if ids := sessionsIn(t, d); len(ids) == 0 {
		t.Fatal("no session in the test's database, want at least the one that asked")
	}
	gone := d.Open(t)
	var id int64
	if err := gone.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d.DB, id)
}

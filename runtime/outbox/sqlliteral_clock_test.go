package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// The one-function clock the inline statements get reads the same instant as sqlc's spelling,
// to the microsecond, in every session time zone: both sides of each comparison are evaluated
// in one statement, and they must agree every time.
func TestClockSpellingsAgree(t *testing.T) {
	t.Parallel()
	db := migrated(t)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, zone := range []string{"+00:00", "+05:30", "-09:45"} {
		if _, err := conn.ExecContext(ctx, "SET time_zone = '"+zone+"'"); err != nil {
			t.Fatal(err)
		}
		// Many samples, one statement each: a second boundary or a microsecond between the
		// functions' readings would show as a difference.
		for range 200 {
			var same bool
			if err := conn.QueryRowContext(ctx, "SELECT "+sqlcClock+" = UTC_TIMESTAMP(6)").Scan(&same); err != nil {
				t.Fatal(err)
			}
			if !same {
				t.Fatalf("time_zone %s: sqlc's clock spelling and UTC_TIMESTAMP(6) differ", zone)
			}
		}
	}
}

// Enqueue's inline INSERT carries the one-function clock instead of sqlc's spelling.
func TestInlineStatementsGetTheLeanClock(t *testing.T) {
	rec := &recordingDB{}
	_, err := q.MessageInsertNowInline(context.Background(), inlineExec{rec}, store.MessageInsertNowInlineParams{
		EventType: "t", Payload: []byte(`{}`), MaxAttempts: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.query, "NOW(6)") || strings.Count(rec.query, "UTC_TIMESTAMP(6)") != 1 || strings.Contains(rec.query, "?") {
		t.Fatalf("the inline statement keeps sqlc's clock, lost it or kept a placeholder:\n%s", rec.query)
	}
}

// recordingDB records the statement it is asked to run, and runs none.
type recordingDB struct {
	store.DBTX
	query string
}

func (r *recordingDB) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%d arguments sent with an inline statement", len(args))
	}
	r.query = query
	return oneRow{}, nil
}

// oneRow is the result of an INSERT of one row with id 1.
type oneRow struct{}

func (oneRow) LastInsertId() (int64, error) { return 1, nil }
func (oneRow) RowsAffected() (int64, error) { return 1, nil }

package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// A server that logs statements rejects the worker's READ COMMITTED writes (error 1665):
// Migrate and NewWorker say so at start. Where the binary log is off (MariaDB's default), the
// setting is harmless and both go on.
func TestStatementBinlogIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	d := testdb.Migrated(t)
	var logBin int
	if err := d.QueryRow("SELECT @@log_bin").Scan(&logBin); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", d.DSN+"&binlog_format=%27STATEMENT%27")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	merr := Migrate(context.Background(), db)
	r := NewRouter()
	r.Handle("e", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
	_, werr := NewWorker(db, r, Config{})
	if logBin == 1 {
		for name, err := range map[string]error{"Migrate": merr, "NewWorker": werr} {
			if err == nil || !strings.Contains(err.Error(), "binlog_format=STATEMENT") {
				t.Errorf("%s with log_bin=ON and binlog_format=STATEMENT: err = %v, want it to name binlog_format=STATEMENT", name, err)
			}
		}
		// And the refusal is right: a READ COMMITTED write does fail there.
		tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("UPDATE outbox_messages SET attempts = 0 WHERE id = 0"); err == nil || !strings.Contains(err.Error(), "1665") {
			t.Errorf("READ COMMITTED write under binlog_format=STATEMENT: %v, want error 1665", err)
		}
		return
	}
	if merr != nil || werr != nil {
		t.Errorf("log_bin=OFF, binlog_format=STATEMENT: Migrate %v, NewWorker %v; want both nil", merr, werr)
	}
}

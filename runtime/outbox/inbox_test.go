package outbox

import (
	"context"
	"strings"
	"testing"
)

func TestOnce(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	once := func(consumer, key string, commit bool) bool {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, err := Once(ctx, tx, consumer, key)
		if err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return first
	}
	if !once("mailer", "k1", false) {
		t.Fatal("first Once in a rolled-back tx: want true")
	}
	if !once("mailer", "k1", true) {
		t.Fatal("Once after a rollback: want true (the rollback recorded nothing)")
	}
	if once("mailer", "k1", true) {
		t.Fatal("second committed Once: want false")
	}
	if !once("billing", "k1", true) {
		t.Fatal("another consumer with the same key: want true")
	}
	if _, err := Once(ctx, db, "", "k"); err == nil {
		t.Fatal("empty consumer: want an error")
	}
	if _, err := Once(ctx, db, "c", strings.Repeat("x", 192)); err == nil {
		t.Fatal("192-character key: want an error")
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM outbox_inbox").Scan(&n); err != nil || n != 2 {
		t.Fatalf("outbox_inbox rows = %d, %v; want 2", n, err)
	}
}

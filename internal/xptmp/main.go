package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/outboxgen/outboxgen/queries"
)

// Sequential drain: claim (variant) + commit, then mark sent. Times each step.
func main() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("DSN"))
	if err != nil { panic(err) }
	must := func(q string, a ...any) { if _, err := db.Exec(q, a...); err != nil { panic(fmt.Sprint(q, err)) } }
	must("DROP DATABASE IF EXISTS xp"); must("CREATE DATABASE xp"); db.Close()
	db, _ = sql.Open("mysql", strings.Replace(os.Getenv("DSN"), "/?", "/xp?", 1)+"&interpolateParams=true")
	db.SetMaxOpenConns(4)
	for _, s := range queries.Statements() { must(s) }
	for b := 0; b < 20000; b += 500 {
		tx, _ := db.Begin()
		for i := 0; i < 500; i++ { if _, err := tx.Exec("INSERT INTO outbox_messages (event_type,payload,idempotency_key,status,attempts,max_attempts,next_attempt_at,created_at) VALUES ('drain',?,'k','PENDING',0,5,UTC_TIMESTAMP(6),UTC_TIMESTAMP(6))", fmt.Sprintf(`{"a":%d,"pad":"%s"}`, i, strings.Repeat("x", 180))); err != nil { panic(err) } }
		tx.Commit()
	}
	variant := os.Getenv("V")
	seek := "1970-01-01"
	var ts [4]time.Duration
	for round := 0; round < 200; round++ {
		t0 := time.Now()
		tx, _ := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		var ids []string
		scan := func(q string) {
			r, err := tx.Query(q)
			if err != nil { panic(err) }
			ids = ids[:0]
			cols, _ := r.Columns()
			for r.Next() {
				v := make([]sql.RawBytes, len(cols)); p := make([]any, len(cols)); for i := range v { p[i] = &v[i] }
				r.Scan(p...)
				ids = append(ids, string(v[0]))
				if len(cols) > 1 { seek = string(v[len(cols)-1]) }
			}
			r.Close()
		}
		switch variant {
		case "a": // current
			scan("SELECT id, event_type, payload, idempotency_key, attempts, max_attempts, created_at, next_attempt_at FROM outbox_messages WHERE status='PENDING' AND next_attempt_at >= '" + seek + "' AND next_attempt_at <= UTC_TIMESTAMP(6) AND event_type IN ('drain') ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED")
		case "b": // candidates without lock (covering), then lock by PK
			scan("SELECT id, next_attempt_at FROM outbox_messages WHERE status='PENDING' AND next_attempt_at >= '" + seek + "' AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY next_attempt_at, id LIMIT 100")
			ts[3] += time.Since(t0)
			scan("SELECT id, event_type, payload, idempotency_key, attempts, max_attempts, created_at, next_attempt_at FROM outbox_messages WHERE id IN (" + strings.Join(ids, ",") + ") AND status='PENDING' AND event_type IN ('drain') FOR UPDATE SKIP LOCKED")
		case "b2": // candidates with the type filter, 2n, no lock; then lock by PK, n
			scan("SELECT id, next_attempt_at FROM outbox_messages WHERE status='PENDING' AND next_attempt_at >= '" + seek + "' AND next_attempt_at <= UTC_TIMESTAMP(6) AND event_type IN ('drain') ORDER BY next_attempt_at, id LIMIT 200")
			ts[3] += time.Since(t0)
			scan("SELECT id, event_type, payload, idempotency_key, attempts, max_attempts, created_at, next_attempt_at FROM outbox_messages WHERE id IN (" + strings.Join(ids, ",") + ") AND status='PENDING' AND next_attempt_at <= UTC_TIMESTAMP(6) AND event_type IN ('drain') ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED")
		case "c": // current without the event_type filter
			scan("SELECT id, event_type, payload, idempotency_key, attempts, max_attempts, created_at, next_attempt_at FROM outbox_messages WHERE status='PENDING' AND next_attempt_at >= '" + seek + "' AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED")
		case "d": // current, ids only
			scan("SELECT id, next_attempt_at FROM outbox_messages WHERE status='PENDING' AND next_attempt_at >= '" + seek + "' AND next_attempt_at <= UTC_TIMESTAMP(6) AND event_type IN ('drain') ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED")
		}
		t1 := time.Now()
		if len(ids) == 0 { tx.Rollback(); break }
		in := strings.Join(ids, ",")
		if _, err := tx.Exec("UPDATE outbox_messages SET status='PROCESSING', attempts=attempts+1, claim_token='abcdefabcdefabcdefabcdefabcdefab', claimed_at=UTC_TIMESTAMP(6), reclaim_after=UTC_TIMESTAMP(6) WHERE status = 'PENDING' AND id IN (" + in + ")"); err != nil { panic(err) }
		tx.Commit()
		t2 := time.Now()
		if _, err := db.Exec("UPDATE outbox_messages FORCE INDEX (PRIMARY) SET status='SENT', sent_at=UTC_TIMESTAMP(6) WHERE status = 'PROCESSING' AND id IN (" + in + ")"); err != nil { panic(err) }
		t3 := time.Now()
		ts[0] += t1.Sub(t0); ts[1] += t2.Sub(t1); ts[2] += t3.Sub(t2)
	}
	fmt.Printf("V=%s per claim of 100: select %.2fms (first step %.2f) claim-update+commit %.2fms sent %.2fms\n", variant, float64(ts[0])/200e6, float64(ts[3])/200e6, float64(ts[1])/200e6, float64(ts[2])/200e6)
}

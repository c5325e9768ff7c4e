//go:build relstub

package main

// A deliberately plain stand-in for outbox.Worker (build tag relstub, OUTBOX_REL_STUB=1), used
// to validate the harness itself before the real worker existed and as a reference point: the
// same claim / fenced record / reclaim protocol, one message at a time. SQL strings are fine
// here: this is test code, not the runtime.
//
// With OUTBOX_REL_STUB_NOFENCE=1 its result writes drop the fence (WHERE id=? only): the
// suite's own control, which must make the ledger and history checks fail.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

const now6 = "UTC_TIMESTAMP(6)"

func runWorker(ctx context.Context, db *sql.DB, pol outbox.Policy, h outbox.HandlerFunc, c workerConfig) error {
	pol = pol.WithDefaults()
	fence := " AND status='PROCESSING' AND claim_token=?"
	noFence := os.Getenv("OUTBOX_REL_STUB_NOFENCE") == "1"
	if noFence {
		fence = ""
	}
	sem := make(chan struct{}, c.Concurrency)
	var wg sync.WaitGroup
	lastReclaim := time.Time{}
	for ctx.Err() == nil {
		if time.Since(lastReclaim) > 500*time.Millisecond {
			lastReclaim = time.Now()
			if _, err := db.ExecContext(ctx, `UPDATE outbox_messages SET status = IF(attempts >= max_attempts, 'FAILED', 'PENDING'),
				last_error = IF(attempts >= max_attempts, 'lease expired', last_error), failed_at = IF(attempts >= max_attempts, `+now6+`, failed_at),
				next_attempt_at = `+now6+` WHERE status = 'PROCESSING' AND reclaim_after < `+now6); err != nil && ctx.Err() == nil {
				c.Logger.Warn("reclaim", "err", err)
			}
		}
		free := c.Concurrency - len(sem)
		if free == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		ds, err := stubClaim(ctx, db, min(free, c.BatchSize), c.StaleAfter)
		if err != nil {
			if ctx.Err() == nil {
				c.Logger.Warn("claim", "err", err)
				time.Sleep(c.PollInterval)
			}
			continue
		}
		if len(ds) == 0 {
			time.Sleep(c.PollInterval)
			continue
		}
		for _, d := range ds {
			sem <- struct{}{}
			wg.Add(1)
			go func(d stubDelivery) {
				defer wg.Done()
				defer func() { <-sem }()
				hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pol.Timeout)
				err := func() (err error) {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panic: %v", r)
						}
					}()
					return h(hctx, d.payload, d.Delivery)
				}()
				cancel()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer rcancel()
				var q string
				args := []any{}
				switch {
				case err == nil:
					q = `UPDATE outbox_messages SET status='SENT', sent_at=` + now6 + ` WHERE id=?` + fence
				case outbox.IsPermanent(err) || d.Attempt >= d.max:
					q = `UPDATE outbox_messages SET status='FAILED', failed_at=` + now6 + `, last_error=? WHERE id=?` + fence
					args = append(args, err.Error())
				default:
					q = `UPDATE outbox_messages SET status='PENDING', next_attempt_at=TIMESTAMPADD(MICROSECOND, 50000, ` + now6 + `), last_error=? WHERE id=?` + fence
					args = append(args, err.Error())
				}
				args = append(args, int64(d.MessageID))
				if !noFence {
					args = append(args, d.ClaimToken)
				}
				if _, err := db.ExecContext(rctx, q, args...); err != nil {
					c.Logger.Warn("record", "err", err)
				}
			}(d)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.ShutdownTimeout):
	}
	return nil
}

type stubDelivery struct {
	outbox.Delivery
	payload json.RawMessage
	max     int
}

func stubClaim(ctx context.Context, db *sql.DB, n int, lease time.Duration) (_ []stubDelivery, err error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rs, err := tx.QueryContext(ctx, `SELECT id, payload, idempotency_key, attempts, max_attempts, created_at FROM outbox_messages
		WHERE status='PENDING' AND next_attempt_at <= `+now6+` AND event_type = ? ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED`, EventType, n)
	if err != nil {
		return nil, err
	}
	var ds []stubDelivery
	for rs.Next() {
		var d stubDelivery
		var id int64
		var payload string
		if err := rs.Scan(&id, &payload, &d.IdempotencyKey, &d.Attempt, &d.max, &d.EnqueuedAt); err != nil {
			rs.Close()
			return nil, err
		}
		d.MessageID, d.payload, d.EventType, d.ClaimToken = outbox.MessageID(id), json.RawMessage(payload), EventType, token
		d.Attempt++
		ds = append(ds, d)
	}
	if err := rs.Close(); err != nil {
		return nil, err
	}
	for _, d := range ds {
		if _, err := tx.ExecContext(ctx, `UPDATE outbox_messages SET status='PROCESSING', attempts=attempts+1, claimed_at=`+now6+`,
			reclaim_after=TIMESTAMPADD(MICROSECOND, ?, `+now6+`), claim_token=? WHERE id=?`, lease.Microseconds(), token, int64(d.MessageID)); err != nil {
			return nil, err
		}
	}
	return ds, tx.Commit()
}

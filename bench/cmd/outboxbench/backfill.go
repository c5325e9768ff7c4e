// The backfill workload: many messages enqueued in one transaction.

package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// backfillWay is how a backfill writes its messages.
type backfillWay int

const (
	backfillL0      backfillWay = iota // hand-written multi-row INSERTs of the same rows
	backfillMany                       // outbox.EnqueueMany
	backfillSingles                    // one outbox.Enqueue per message
)

// backfillL0Rows is the rows of each of L0's INSERTs: as many as EnqueueMany's largest chunk.
const backfillL0Rows = 4096

// backfillLabel is the row of the table a backfill way is reported in. L0 and EnqueueMany share
// one, so that the table shows their ratio.
func backfillLabel(n int, way backfillWay) string {
	if way == backfillSingles {
		return fmt.Sprintf("Backfill %d messages in one transaction, one Enqueue each", n)
	}
	return fmt.Sprintf("Backfill %d messages in one transaction (outboxgen: EnqueueMany)", n)
}

// runBackfill writes n messages of 200-byte payloads in one transaction, commit included, and
// reports messages per second. Every way writes the same columns of outbox_messages; the rows
// are counted and checked afterwards (losses: rows missing).
func (e runEnv) runBackfill(ctx context.Context, n int, way backfillWay) (result, error) {
	res := result{Unit: "msg/s"}
	err := e.withDB(ctx, "backfill", oursSystem{}, func(_ string, db *sql.DB) error {
		now := time.Now()
		ms := make([]outbox.Message, n)
		for i := range ms {
			ms[i] = outbox.Message{EventType: ourType, Payload: makePayload(int64(i), now)}
		}
		start := time.Now()
		var ids []outbox.MessageID
		err := plainTx(ctx, db, func(tx *sql.Tx) error {
			switch way {
			case backfillL0:
				return backfillRaw(ctx, tx, ms)
			case backfillMany:
				var err error
				ids, err = outbox.EnqueueMany(ctx, tx, ms)
				return err
			}
			for _, m := range ms {
				id, err := outbox.Enqueue(ctx, tx, m)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return nil
		})
		elapsed := time.Since(start)
		if err != nil {
			return err
		}
		res.Value = float64(n) / elapsed.Seconds()
		stored, err := countRows(ctx, db, "outbox_messages")
		if err != nil {
			return err
		}
		if d := int64(n) - stored; d > 0 {
			res.Loss = d
		} else {
			res.Dup = -d
		}
		return checkBackfillIDs(ctx, db, ids)
	})
	return res, err
}

// backfillRaw is L0: what a hand-written backfill sends, multi-row INSERTs of backfillL0Rows
// rows with the values written in as hex literals, the clock from the server.
func backfillRaw(ctx context.Context, tx *sql.Tx, ms []outbox.Message) error {
	for len(ms) > 0 {
		chunk := ms[:min(backfillL0Rows, len(ms))]
		ms = ms[len(chunk):]
		var b strings.Builder
		b.WriteString("INSERT INTO outbox_messages (event_type, payload, max_attempts, next_attempt_at, created_at) VALUES ")
		for i, m := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(X'%s',X'%s',10,UTC_TIMESTAMP(6),UTC_TIMESTAMP(6))", hex.EncodeToString([]byte(m.EventType)), hex.EncodeToString(m.Payload))
		}
		if _, err := tx.ExecContext(ctx, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// checkBackfillIDs checks that the ids returned are those of the messages, in input order:
// message i holds sequence number i.
func checkBackfillIDs(ctx context.Context, db *sql.DB, ids []outbox.MessageID) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := db.QueryContext(ctx, "SELECT id, payload FROM outbox_messages")
	if err != nil {
		return err
	}
	defer rows.Close()
	seqOf := make(map[outbox.MessageID]int64, len(ids))
	for rows.Next() {
		var id outbox.MessageID
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			return err
		}
		if seqOf[id], err = payloadSeq(p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, id := range ids {
		if seq, ok := seqOf[id]; !ok || seq != int64(i) {
			return fmt.Errorf("backfill: id %d returned for message %d holds message %d (found %v)", id, i, seq, ok)
		}
	}
	return nil
}

// The steady workload: a paced producer for a long time with retention on and short, while the
// table's rows, its size, the claim p99 and the delivery lag are sampled at a fixed interval.
// Nothing here should grow with time.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// steadyProducers is the producer's goroutines: enough that the rate holds while a commit waits
// on the disk.
const steadyProducers = 16

func steadyLabel(r retSizes) string {
	return fmt.Sprintf("Steady %d msg/s for %s, Retention.Sent %s, cleaner every %s", r.SteadyRate, r.SteadyDur, r.SteadyKeep, r.SteadyClean)
}

// steadySample is one sampling interval.
type steadySample struct {
	at         time.Duration // since the producer started
	rows       int64
	dataMiB    float64 // data_length + index_length after ANALYZE TABLE
	claims     []float64
	lags       []float64 // created (the producer's clock before its transaction) to handled, ms
	produced   int64     // messages committed in the interval
	sampleErrs string
}

// lagLog collects handler-side lags between two samples.
type lagLog struct {
	mu sync.Mutex
	ms []float64
}

func (l *lagLog) add(v float64) {
	l.mu.Lock()
	l.ms = append(l.ms, v)
	l.mu.Unlock()
}

func (l *lagLog) take() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ms
	l.ms = nil
	return out
}

// payloadTS reads the producer's send time (Unix nanoseconds) from a payload.
func payloadTS(p []byte) (int64, bool) {
	s := string(p)
	i := strings.Index(s, `"ts":`)
	if i < 0 {
		return 0, false
	}
	s = s[i+5:]
	j := strings.IndexByte(s, ',')
	if j < 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(s[:j], 10, 64)
	return v, err == nil
}

// runSteady commits SteadyRate transactions a second for SteadyDur, each inserting a business
// row and enqueueing one message without outbox.InTx (as a producer in another process does, so
// every message goes through a claim and the claim p99 means something), while one worker with
// Retention.Sent SteadyKeep and ReclaimInterval SteadyClean drains them. Every SteadyEvery it
// samples the table. It returns the rows of the table; the first carries the samples.
func (e runEnv) runSteady(ctx context.Context) ([]result, error) {
	rs := e.sz.Ret
	n := int(float64(rs.SteadyRate) * rs.SteadyDur.Seconds())
	var out []result
	err := e.withDB(ctx, "steady", oursSystem{}, func(dbName string, db *sql.DB) error {
		pool, _, err := e.srv.open(dbName, e.mode)
		if err != nil {
			return err
		}
		defer pool.Close()
		tr := newTracker(n)
		lags := &lagLog{}
		obs := &claimTimes{}
		cfg := outbox.Config{Retention: outbox.Retention{Sent: rs.SteadyKeep}, ReclaimInterval: rs.SteadyClean}
		stop, err := retWorker(ctx, pool, cfg, obs, func(p []byte) {
			if ts, ok := payloadTS(p); ok {
				lags.add(float64(time.Now().UnixNano()-ts) / 1e6)
			}
			tr.deliverPayload(p)
		})
		if err != nil {
			return err
		}
		var produced, late atomic.Int64
		start := time.Now()
		prodErr := make(chan error, 1)
		go func() { prodErr <- pacedProducer(ctx, db, n, rs.SteadyRate, start, &produced, &late) }()

		var samples []steadySample
		tick := time.NewTicker(rs.SteadyEvery)
		var lastProduced int64
		for at := rs.SteadyEvery; at <= rs.SteadyDur; at += rs.SteadyEvery {
			select {
			case <-ctx.Done():
				tick.Stop()
				return errors.Join(ctx.Err(), stop())
			case <-tick.C:
			}
			s := steadySample{at: time.Since(start), claims: obs.take(), lags: lags.take()}
			p := produced.Load()
			s.produced, lastProduced = p-lastProduced, p
			var err error
			if s.rows, s.dataMiB, err = tableSize(ctx, db); err != nil {
				s.sampleErrs = err.Error()
			}
			samples = append(samples, s)
		}
		tick.Stop()
		perr := <-prodErr
		drainErr := awaitSteady(ctx, tr, db, n)
		if err := stop(); err != nil {
			return errors.Join(perr, drainErr, fmt.Errorf("stop worker: %w", err))
		}
		if perr != nil {
			return perr
		}
		out = steadyResults(rs, samples, late.Load())
		out[0].Loss, out[0].Dup = tr.losses(), tr.dups()
		return drainErr
	})
	return out, err
}

// pacedProducer commits n transactions, the i-th due at start + i/rate, on steadyProducers
// goroutines; late counts those that began more than 100 ms after they were due.
func pacedProducer(ctx context.Context, db *sql.DB, n, rate int, start time.Time, produced, late *atomic.Int64) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for g := 0; g < steadyProducers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
				if d := time.Until(due); d > 0 {
					if sleepCtx(ctx, d) != nil {
						return
					}
				} else if d < -100*time.Millisecond {
					late.Add(1)
				}
				p := makePayload(i, time.Now())
				err := plainTx(ctx, db, func(tx *sql.Tx) error {
					if err := insertBiz(ctx, tx, i); err != nil {
						return err
					}
					_, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: ourType, Payload: p})
					return err
				})
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				produced.Add(1)
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// tableSize is outbox_messages' row count and its data and index size in MiB as
// information_schema.TABLES reports it after ANALYZE TABLE. InnoDB's figures count the pages
// allocated to the table's indexes, an estimate refreshed by ANALYZE; pages freed by deletes are
// reused by later inserts but not given back to the file system, so the size shows whether the
// table keeps growing, not the bytes of its live rows.
func tableSize(ctx context.Context, db *sql.DB) (int64, float64, error) {
	rows, err := db.QueryContext(ctx, "ANALYZE TABLE outbox_messages")
	if err != nil {
		return 0, 0, err
	}
	for rows.Next() {
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, err
	}
	n, err := countRows(ctx, db, "outbox_messages")
	if err != nil {
		return 0, 0, err
	}
	data, index, err := tableBytes(ctx, db)
	return n, float64(data+index) / (1 << 20), err
}

// tableBytes is outbox_messages' data and index size as information_schema.TABLES has it, as
// of the last ANALYZE TABLE.
func tableBytes(ctx context.Context, db *sql.DB) (data, index int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT data_length, index_length FROM information_schema.TABLES
		WHERE table_schema = DATABASE() AND table_name = 'outbox_messages'`).Scan(&data, &index)
	return data, index, err
}

// steadyWindow is the span of "first minute" and "last minute": a minute, or a third of a
// shorter run.
func steadyWindow(dur time.Duration) time.Duration { return min(time.Minute, dur/3) }

// steadyResults turns the samples into the table's rows: the largest row count and size, the
// claim p99 and the lag p99 over the first and the last window, the largest lag; the first row's
// note carries every sample.
func steadyResults(rs retSizes, samples []steadySample, late int64) []result {
	label := steadyLabel(rs)
	win := steadyWindow(rs.SteadyDur)
	var firstC, lastC, firstL, lastL, allL []float64
	var maxRows int64
	var maxMiB, maxLag float64
	var sb strings.Builder
	sb.WriteString("\n\n| s since start | rows | MiB data+index | claim p99 ms (claims) | lag p99 ms | messages committed |\n|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range samples {
		k := len(s.claims)
		lag99 := pct(append([]float64(nil), s.lags...), 99)
		size := fmt.Sprintf("%.1f", s.dataMiB)
		if s.sampleErrs != "" {
			// The server's error text goes in quoted, so that it cannot break the table.
			size = fmt.Sprintf("error %q", strings.ReplaceAll(s.sampleErrs, "|", "/"))
		}
		fmt.Fprintf(&sb, "| %.0f | %d | %s | %.2f (%d) | %.1f | %d |\n", s.at.Seconds(), s.rows, size, pct(append([]float64(nil), s.claims...), 99), k, lag99, s.produced)
		maxRows, maxMiB = max(maxRows, s.rows), max(maxMiB, s.dataMiB)
		for _, l := range s.lags {
			maxLag = max(maxLag, l)
		}
		allL = append(allL, s.lags...)
		// A sample closes the interval that ends at s.at: it belongs to the first window when it
		// ends inside it, to the last when it begins inside it.
		if s.at <= win+rs.SteadyEvery/2 {
			firstC, firstL = append(firstC, s.claims...), append(firstL, s.lags...)
		}
		if s.at-rs.SteadyEvery >= rs.SteadyDur-win-rs.SteadyEvery/2 {
			lastC, lastL = append(lastC, s.claims...), append(lastL, s.lags...)
		}
	}
	lateNote := ""
	if late > 0 {
		lateNote = fmt.Sprintf("; the producer began %d transactions more than 100 ms late (the machine did not keep the rate)", late)
	}
	bound := float64(rs.SteadyRate) * (rs.SteadyKeep + rs.SteadyClean).Seconds()
	return []result{
		{Workload: label + ", max rows", Unit: "rows", Value: float64(maxRows),
			Note: fmt.Sprintf("rate x (Retention.Sent + cleaner interval) = %.0f rows%s; the samples:%s", bound, lateNote, strings.TrimSuffix(sb.String(), "\n"))},
		{Workload: label + ", max data+index size", Unit: "MiB", Value: maxMiB},
		{Workload: label + ", max rows, first half after warm-up", Unit: "rows", Value: float64(halfMax(samples, rs, true))},
		{Workload: label + ", max rows, second half after warm-up", Unit: "rows", Value: float64(halfMax(samples, rs, false))},
		{Workload: label + ", claim p99, first window", Unit: "ms", Value: pct(firstC, 99), Note: fmt.Sprintf("window %s, %d claims", win, len(firstC))},
		{Workload: label + ", claim p99, last window", Unit: "ms", Value: pct(lastC, 99), Note: fmt.Sprintf("window %s, %d claims", win, len(lastC))},
		{Workload: label + ", lag p99, first window", Unit: "ms", Value: pct(firstL, 99), Note: "lag: from the producer's clock before its transaction to the handler's call"},
		{Workload: label + ", lag p99, last window", Unit: "ms", Value: pct(lastL, 99)},
		{Workload: label + ", lag p99", Unit: "ms", Value: pct(allL, 99)},
		{Workload: label + ", lag max", Unit: "ms", Value: maxLag},
	}
}

// halfMax is the largest row count sampled in the first or the second half of the run after its
// warm-up: the rows grow from none until the first rows are past Retention.Sent and the cleaner
// has run, Retention.Sent plus the cleaner's interval after the start.
func halfMax(samples []steadySample, rs retSizes, first bool) int64 {
	warm := rs.SteadyKeep + rs.SteadyClean
	mid := warm + (rs.SteadyDur-warm)/2
	var m int64
	for _, s := range samples {
		if s.at > warm && (s.at <= mid) == first {
			m = max(m, s.rows)
		}
	}
	return m
}

// awaitSteady waits until every message was handled and no row is left unfinished. The cleaner
// deletes rows as it goes, so the SENT rows are not counted.
func awaitSteady(ctx context.Context, tr *tracker, db *sql.DB, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for !tr.wait(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out with %d of %d messages handled (missing seq %v)", tr.distinct.Load(), n, tr.missing(10))
		}
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		var open int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages WHERE status <> 'SENT'").Scan(&open); err != nil {
			return err
		}
		if open == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after the run: %d rows not SENT", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

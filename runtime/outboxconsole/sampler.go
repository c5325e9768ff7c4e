package outboxconsole

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The chart's data: the console samples outbox.Stats and the newest id every interval and keeps
// an hour of samples in memory. Nothing is stored in the database; a restarted console starts
// an empty chart.

// history is how far back the chart looks.
const history = time.Hour

// sample is one reading of the table.
type sample struct {
	At                               time.Time
	Pending, Due, Processing, Failed int64
	MaxID                            int64
	Stuck, Stale                     int64
	OldestDue, OldestPending         time.Duration
}

type sampler struct {
	db    *sql.DB
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	samples []sample // oldest first, at most an hour's worth
	lastErr error
	errAt   time.Time
}

func newSampler(db *sql.DB, every time.Duration, now func() time.Time) *sampler {
	return &sampler{db: db, every: every, now: now}
}

// run samples at once and then every interval until ctx is done.
func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce reads the table once and keeps the sample, or the error (unless parent is done:
// the console is closing).
func (s *sampler) sampleOnce(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(s.every, 5*time.Second))
	defer cancel()
	snap, err := outbox.Stats(ctx, s.db)
	var maxID int64
	if err == nil {
		maxID, err = store.New().MessageMaxID(ctx, s.db)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if err != nil {
		if parent.Err() == nil {
			s.lastErr, s.errAt = err, now
		}
		return
	}
	s.lastErr = nil
	s.add(sample{
		At: now, Pending: snap.Pending, Due: snap.Due, Processing: snap.Processing, Failed: snap.Failed,
		Stuck: snap.Stuck, Stale: snap.Stale, OldestDue: snap.OldestDue, OldestPending: snap.OldestPending,
		MaxID: maxID,
	})
}

// add appends a sample and drops those older than the history (s.mu held).
func (s *sampler) add(x sample) {
	s.samples = append(s.samples, x)
	cut := 0
	for cut < len(s.samples) && x.At.Sub(s.samples[cut].At) > history {
		cut++
	}
	if cut > 0 {
		s.samples = append(s.samples[:0], s.samples[cut:]...)
	}
}

// snapshot returns a copy of the samples, and the last sampling error (nil after a success)
// with its time.
func (s *sampler) snapshot() ([]sample, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...), s.errAt, s.lastErr
}

// rate is the traffic between two samples, per minute.
type rate struct {
	At       time.Time
	Enqueued float64 // new ids
	Done     float64 // delivered (SENT), estimated
	Failed   float64 // newly FAILED, at least
}

// rates turns consecutive samples into per-minute rates. Stats never counts SENT rows (that
// part of the table grows without bound), so deliveries are derived: the new ids (arrivals),
// less what stayed in the backlog (PENDING + PROCESSING) and what went FAILED. Exact but for
// purges of FAILED rows, rows edited by hand, and ids of rolled-back inserts; never below 0.
func rates(samples []sample) []rate {
	var out []rate
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		mins := b.At.Sub(a.At).Minutes()
		if mins <= 0 {
			continue
		}
		arrived := max(b.MaxID-a.MaxID, 0)
		backlog := (b.Pending + b.Processing) - (a.Pending + a.Processing)
		failed := b.Failed - a.Failed
		sent := max(arrived-backlog-failed, 0)
		out = append(out, rate{At: b.At, Enqueued: float64(arrived) / mins, Done: float64(sent) / mins, Failed: float64(max(failed, 0)) / mins})
	}
	return out
}

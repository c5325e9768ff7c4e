// How the cleaner sizes its batches and paces itself between them, for every table it cleans
// in batches.

package outbox

import (
	"context"
	"time"
)

const (
	// A pass deletes in batches that start at retentionBatchStart rows. A batch that took less
	// than retentionFast doubles the next, up to retentionBatchMax; one that took more than
	// retentionSlow halves it, down to retentionBatchMin. A slow batch means the table is busy
	// (locks, I/O, a long undo history): smaller batches then hold fewer row locks for less time.
	retentionBatchStart = 1000
	retentionBatchMin   = 100
	retentionBatchMax   = 10000
	retentionFast       = 100 * time.Millisecond
	retentionSlow       = 500 * time.Millisecond
	// Between two batches the cleaner pauses retentionIdleShare times as long as the last one
	// took, within the bounds below. It thus works at most one part in retentionIdleShare+1 of
	// one connection's time. The drain's claims and result writes and the application's own
	// transactions share the server's CPUs with it, and a backlog of old rows is not urgent.
	// BENCHMARKS.md measures its cost to the drain and to W1 while it deletes a backlog.
	retentionIdleShare = 7
	retentionPauseMin  = 10 * time.Millisecond
	retentionPauseMax  = 5 * time.Second
)

// batchPacer is the size of the cleaner's next batch, adapted to how long the last one took.
type batchPacer struct{ size int }

func newBatchPacer() batchPacer { return batchPacer{size: retentionBatchStart} }

// next records that a batch of the current size took took, sizes the next one and returns
// the pause before it.
func (p *batchPacer) next(took time.Duration) time.Duration {
	switch {
	case took < retentionFast:
		p.size = min(2*p.size, retentionBatchMax)
	case took > retentionSlow:
		p.size = max(p.size/2, retentionBatchMin)
	}
	return min(max(retentionIdleShare*took, retentionPauseMin), retentionPauseMax)
}

// done is next followed by its pause. It returns false when ctx ended during the pause.
func (p *batchPacer) done(ctx context.Context, took time.Duration) bool {
	pause := time.NewTimer(p.next(took))
	defer pause.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-pause.C:
		return true
	}
}

package outbox

import (
	"testing"
	"time"
)

func TestBatchPacerSizesAndPaces(t *testing.T) {
	p := newBatchPacer()
	steps := []struct {
		took      time.Duration
		wantSize  int
		wantPause time.Duration
	}{
		{0, 2000, retentionPauseMin},                            // nothing to wait for: the floor
		{50 * time.Millisecond, 4000, 350 * time.Millisecond},   // fast: doubles, idles 7 times as long
		{200 * time.Millisecond, 4000, 1400 * time.Millisecond}, // between: the size stays
		{50 * time.Millisecond, 8000, 350 * time.Millisecond},
		{50 * time.Millisecond, retentionBatchMax, 350 * time.Millisecond},
		{50 * time.Millisecond, retentionBatchMax, 350 * time.Millisecond},
		{time.Second, retentionBatchMax / 2, retentionPauseMax}, // slow: halves, the pause is capped
	}
	for i, s := range steps {
		pause := p.next(s.took)
		if p.size != s.wantSize || pause != s.wantPause {
			t.Fatalf("step %d (took %v): size %d, pause %v; want %d, %v", i, s.took, p.size, pause, s.wantSize, s.wantPause)
		}
	}
	for range 20 {
		p.next(time.Second)
	}
	if p.size != retentionBatchMin {
		t.Fatalf("after many slow batches the size is %d, want the floor %d", p.size, retentionBatchMin)
	}
}

// The cleaner's share of one connection's time is the batch's time over the batch's and the
// pause's together, whatever the batch took between the pause's bounds.
func TestBatchPacerWorksOnePartInEight(t *testing.T) {
	for _, took := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond} {
		p := newBatchPacer()
		pause := p.next(took)
		share := float64(took) / float64(took+pause)
		if share != 1.0/8 {
			t.Errorf("a batch of %v is followed by %v: a share of %.3f, want 1/8", took, pause, share)
		}
	}
}

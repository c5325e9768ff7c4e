// The worker's test signals (River's testSignals): each step of the cycle reports that it has
// happened, so that a test waits for the step instead of sleeping for a guess. They are no-ops
// until a test inits them.

package outbox

import "github.com/outboxgen/outboxgen/internal/testsignal"

// workerTestSignals are sent by a running Worker once a test has called init.
type workerTestSignals struct {
	claimed         testsignal.Signal[int]           // a claim ended: the rows it claimed (0 when it failed)
	flushed         testsignal.Signal[int]           // a batch of results was written: its size
	reclaimed       testsignal.Signal[int64]         // a reclaim ended: the rows it moved
	maintained      testsignal.Signal[struct{}]      // a maintenance pass (reclaim, repair, watch, schema) ended
	handedOff       testsignal.Signal[MessageID]     // a handed-off message was dispatched
	waitingSlots    testsignal.Signal[struct{}]      // the claim loop claims nothing until a dispatch slot frees
	retained        testsignal.Signal[retentionPass] // a retention pass ended: what it deleted
	pausesRefreshed testsignal.Signal[int]           // the pauses were read: how many of the router's types are paused
}

// init enables every signal for tb's test; call it before Run.
func (s *workerTestSignals) init(tb testsignal.TB) {
	s.claimed.Init(tb)
	s.flushed.Init(tb)
	s.reclaimed.Init(tb)
	s.maintained.Init(tb)
	s.handedOff.Init(tb)
	s.waitingSlots.Init(tb)
	s.retained.Init(tb)
	s.pausesRefreshed.Init(tb)
}

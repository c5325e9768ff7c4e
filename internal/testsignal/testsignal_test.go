package testsignal

import (
	"fmt"
	"testing"
	"time"
)

func TestSignalIsANoOpUntilInit(t *testing.T) {
	var s Signal[int]
	s.Signal(1) // must neither block nor panic
	if s.ch != nil {
		t.Fatal("an uninited signal made a channel")
	}
}

func TestSignalDeliversInOrder(t *testing.T) {
	var s Signal[int]
	s.Init(t)
	s.Signal(1)
	s.Signal(2)
	if got := s.WaitOrTimeout(); got != 1 {
		t.Fatalf("first value %d, want 1", got)
	}
	if got := s.WaitOrTimeout(); got != 2 {
		t.Fatalf("second value %d, want 2", got)
	}
	s.RequireEmpty()
}

func TestSignalNeverBlocksWhenFull(t *testing.T) {
	var s Signal[int]
	s.Init(t)
	for i := range bufferSize + 10 {
		s.Signal(i)
	}
	s.Clear()
	s.RequireEmpty()
}

// recordTB records a Fatalf instead of ending the test.
type recordTB struct{ failed string }

func (r *recordTB) Helper() {}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestWaitForFailsWithoutASignal(t *testing.T) {
	var s Signal[int]
	tb := &recordTB{}
	s.Init(tb)
	s.WaitFor(10 * time.Millisecond)
	if tb.failed == "" {
		t.Fatal("WaitFor returned without failing while nothing was sent")
	}
}

func TestRequireEmptyFailsOnAnUnreadValue(t *testing.T) {
	var s Signal[int]
	tb := &recordTB{}
	s.Init(tb)
	s.Signal(7)
	s.RequireEmpty()
	if tb.failed == "" {
		t.Fatal("RequireEmpty passed with an unread value")
	}
}

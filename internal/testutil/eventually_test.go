package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Eventually(t, 5*time.Second, "three checks", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3 (it must stop once the condition holds)", got)
	}
}

// fatalT records Fatalf instead of ending the test.
type fatalT struct {
	testing.TB
	failed string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func TestEventuallyFailsAfterTheTimeout(t *testing.T) {
	ft := &fatalT{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != ft {
				t.Fatalf("recovered %v, want the Fatalf of the timeout", r)
			}
		}()
		Eventually(ft, 30*time.Millisecond, "never", func() bool { return false })
	}()
	if ft.failed == "" {
		t.Fatal("Eventually returned without failing while the condition never held")
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("failed after %s, want at least the 30ms timeout", took)
	}
}

// Package testutil holds helpers the repository's tests share.
package testutil

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually checks its condition.
const pollEvery = 5 * time.Millisecond

// Eventually checks cond until it holds and fails the test if it does not hold within
// timeout. what names the awaited state in the failure message ("the row to be SENT").
// It is for state that has no signal to wait on, such as a row in another process's database;
// a test waits on a signal of the code under test where one exists.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

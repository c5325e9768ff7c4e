// The fleet's view of a failing event type, which Stats reads from the table. A circuit lives
// in one worker's memory, so status and the metrics, which may run in another process, judge
// from the rows instead. A type is failing when at least circuitFailures of its PENDING rows
// failed and wait for a retry, and none of its messages was sent within circuitWindow. That a
// type is failing reads at most four windows of the SENT rows' claim index, never their history. The
// first half sees failures of distinct messages, as the circuit does. The second tells a
// provider that is down from one that fails now and then. It shows a failing type about
// circuitWindow after its last success, long before attempts run out.

package outbox

import (
	"context"
	"sort"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// addFailing sets Retrying and Failing in s.ByType, and s.Failing. Types with fewer retrying
// rows than circuitFailures cost nothing more. Each other type costs one read of the recent
// SENT range of the claim index.
func (s *Snapshot) addFailing(ctx context.Context, db DBTX) error {
	rows, err := q.CircuitRetryingByType(ctx, sdb(db))
	if err != nil {
		return err
	}
	for _, r := range rows {
		tc := s.ByType[r.EventType]
		tc.Retrying = r.Retrying
		if r.Retrying >= circuitFailures {
			recent, err := q.CircuitRecentSent(ctx, sdb(db), store.CircuitRecentSentParams{
				WindowUs: circuitWindow.Microseconds(), EventType: r.EventType})
			if err != nil {
				return err
			}
			if recent == 0 {
				tc.Failing = true
				s.Failing = append(s.Failing, r.EventType)
			}
		}
		s.ByType[r.EventType] = tc
	}
	sort.Strings(s.Failing)
	return nil
}

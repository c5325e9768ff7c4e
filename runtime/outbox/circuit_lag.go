// The delivery lag that a LagObserver hears of. The claim's half is on the database clock,
// which stamped created_at, so the worker keeps the offset of that clock from its own.

package outbox

import (
	"context"
	"sync"
	"time"
)

// lagClockEvery is how old the offset may grow before it is read again, in the background.
const lagClockEvery = time.Minute

// lagClock is the database clock's offset from the local one.
type lagClock struct {
	mu      sync.Mutex
	offset  time.Duration // database clock minus local clock
	at      time.Time     // local time of the last read, zero before the first
	reading bool          // a read is under way
}

// observeLag reports m's delivery lag to a LagObserver, when the worker's Observer is one.
// start is when its handler starts, on the local clock.
func (w *Worker) observeLag(m claimed, start time.Time) {
	o, ok := w.cfg.Observer.(LagObserver)
	if !ok {
		return
	}
	if m.due.IsZero() { // handed off: claimed at its insert, on the local clock
		o.DeliveryLag(m.eventType, max(0, start.Sub(m.claimStart)))
		return
	}
	// The claim's own time on the database clock is claimStart plus the offset. The claim took
	// a millisecond or so, which the local half then counts.
	o.DeliveryLag(m.eventType, max(0, start.Add(w.dbClockOffset()).Sub(m.enqueuedAt)))
}

// dbClockOffset returns the offset, read at once the first time and in the background once it
// is older than lagClockEvery. A failed read keeps the last offset.
func (w *Worker) dbClockOffset() time.Duration {
	c := &w.lagClock
	c.mu.Lock()
	first, stale := c.at.IsZero(), !c.at.IsZero() && time.Since(c.at) > lagClockEvery
	if first || (stale && !c.reading) {
		c.reading = true
		c.mu.Unlock()
		if first {
			w.readDBClock()
		} else {
			go w.readDBClock()
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	return c.offset
}

// readDBClock measures the offset as the database's time minus the midpoint of the round trip.
func (w *Worker) readDBClock() {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	before := time.Now()
	dbNow, err := q.CircuitClockRead(ctx, w.db)
	after := time.Now()
	c := &w.lagClock
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	c.at = after
	if err == nil {
		c.offset = dbNow.Sub(before.Add(after.Sub(before) / 2))
	}
}

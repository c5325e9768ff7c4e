// Retention: how long finished rows stay in outbox_messages (Config.Retention), its defaults and
// their validation. The cleaner that applies it is in retention_clean.go.

package outbox

import (
	"fmt"
	"time"
)

// Retention says how long a worker keeps the finished rows of its router's event types, by the
// database clock. The zero value is the default: SENT rows are deleted a day after they were
// sent, FAILED rows are kept until an operator acts (Retry, Purge, `outboxgen purge`).
type Retention struct {
	// Sent is how long a SENT row stays after its sent_at. 0 takes DefaultRetentionSent;
	// KeepForever keeps SENT rows (then schedule a Purge, or the table grows without end).
	Sent time.Duration
	// Failed is how long a FAILED row stays after its failed_at. 0 takes KeepForever: a FAILED
	// row is evidence an operator may still need. A FAILED ordered message that holds its key
	// is kept whatever this says: deleting it would release the key, which is an operator's
	// decision.
	Failed time.Duration
	// Inbox is the least time a key outbox.Once records in a handler of this worker is kept
	// after its processed_at. Each key stores its expiry, processed_at + max(Inbox, the
	// redelivery window of its handler's policy: inbox_expiry.go), and the cleaner deletes only
	// expired keys. 0 takes max(DefaultRetentionInbox, that window); an explicit value shorter
	// than the window of any of the router's event types is refused by NewWorker; KeepForever
	// keeps the keys. Once outside a worker's handler keeps its key DefaultRetentionInbox.
	Inbox time.Duration
}

// KeepForever as a Retention field keeps those rows until an operator deletes them.
const KeepForever time.Duration = -1

// DefaultRetentionSent is Retention.Sent when it is zero. A day leaves time to inspect what was
// delivered and to answer "was it sent?", while a busy table stays bounded.
const DefaultRetentionSent = 24 * time.Hour

// withDefaults fills the zero fields.
func (r Retention) withDefaults() Retention {
	if r.Sent == 0 {
		r.Sent = DefaultRetentionSent
	}
	if r.Failed == 0 {
		r.Failed = KeepForever
	}
	return r
}

// validate names the field at fault: each is 0, positive or KeepForever.
func (r Retention) validate() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Sent", r.Sent}, {"Failed", r.Failed}, {"Inbox", r.Inbox}} {
		if f.v < 0 && f.v != KeepForever {
			return fmt.Errorf("outbox: Config.Retention.%s must be >= 0 (0 takes the default) or KeepForever, got %s", f.name, f.v)
		}
	}
	return nil
}

// keeps reports whether rows kept for d are never deleted.
func keeps(d time.Duration) bool { return d == KeepForever }

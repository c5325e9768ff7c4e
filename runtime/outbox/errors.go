package outbox

import (
	"errors"
	"time"
)

// Permanent marks err as not worth retrying: the worker records the message FAILED at once,
// with err as last_error, whatever attempts remain. Generated handler wrappers return
// Permanent for a payload that does not decode. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err (or an error it wraps) was made by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfter asks for the next attempt d from now (by the database clock) instead of the
// policy's backoff. The attempt still counts: when attempts are exhausted the message is
// FAILED. RetryAfter(d, nil) is nil. A negative d counts as zero.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryAfterError{d: d, err: err}
}

type retryAfterError struct {
	d   time.Duration
	err error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// retryDelay returns the delay RetryAfter asked for, if any.
func retryDelay(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.d, true
	}
	return 0, false
}

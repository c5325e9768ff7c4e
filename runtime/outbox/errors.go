package outbox

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Permanent marks err as not worth retrying. The worker records the message FAILED at once,
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

// IsPermanent reports whether Permanent made err or an error it wraps.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfter asks for the next attempt d from now on the database clock, instead of after the
// policy's backoff. The attempt still counts, and when attempts are exhausted the message is
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

// explain adds what to do to the errors an operator or a new user meets first. A table that
// does not exist means the schema was never applied to this database. A DSN without
// parseTime=true makes the driver hand DATETIME columns back as bytes. The cause stays wrapped
// for errors.Is and errors.As.
func explain(err error) error {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me) && me.Number == erNoSuchTable:
		return fmt.Errorf("%w (the outboxgen tables are missing from this database: run outboxgen migrate, or outbox.Migrate)", err)
	case errors.As(err, &me) && me.Number == erBadField:
		return fmt.Errorf("%w (the outboxgen tables are older than this outboxgen, schema version %d: run outboxgen migrate, or outbox.Migrate)", err, SchemaVersion)
	case strings.Contains(err.Error(), "unsupported Scan, storing driver.Value type []uint8 into type *time.Time"):
		// database/sql's conversion error from convertAssign is untyped, and its text is stable.
		return fmt.Errorf("DSN must set parseTime=true (%w)", err)
	}
	return err
}

// ER_NO_SUCH_TABLE and ER_BAD_FIELD_ERROR, the same numbers on MySQL and MariaDB.
const (
	erNoSuchTable = 1146
	erBadField    = 1054
)

// The oldest open transaction on the server, and how much undo history InnoDB keeps for it.
// A transaction that holds a consistent snapshot stops InnoDB's purge for every table. The
// index entries of rows that were claimed, sent or deleted then stay delete-marked, and every
// claim steps over them. Claims and retention slow down until that transaction ends. The
// runtime cannot end another session's transaction, so it says which one it is.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// PurgeLag is what holds back InnoDB's purge, as the server reports it.
type PurgeLag struct {
	// Known is false when the user may not read it. Both sources need the PROCESS privilege.
	Known bool
	// OldestTransaction is the age of the oldest transaction open on the server, other than
	// the session that asked. It is zero when none is open.
	OldestTransaction time.Duration
	// ThreadID, User and Host name that transaction's session, for KILL and for finding its
	// owner. User and Host are the server's text and may be anything. They are empty when the
	// session has just ended, or when MySQL cannot list sessions because one of them runs a
	// statement with a character beyond the BMP, such as an emoji.
	ThreadID   int64
	User, Host string
	// HistoryLength is InnoDB's history list length: undo logs of committed transactions not
	// yet purged. It grows while an old snapshot is open.
	HistoryLength int64
	// TransactionsUnreadable is true when MySQL could not list the open transactions. It
	// cannot while one of them runs a statement with a character beyond the BMP, such as an
	// emoji, since it keeps statements as utf8mb3. HistoryLength is still read then.
	TransactionsUnreadable bool
}

// The catalog tables have no sqlc catalog, so this SQL is in Go, as in migrate.go.
// trx_started and NOW() are both in the session's time zone, so their difference is right.
const (
	oldestTrxQuery = `SELECT TIMESTAMPDIFF(MICROSECOND, trx_started, NOW(6)), trx_mysql_thread_id
FROM information_schema.INNODB_TRX
WHERE trx_mysql_thread_id <> CONNECTION_ID()
ORDER BY trx_started, trx_id LIMIT 1`
	sessionQuery = `SELECT USER, HOST FROM information_schema.PROCESSLIST WHERE ID = ?`
	historyQuery = `SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'`
)

// erSpecificAccessDenied is ER_SPECIFIC_ACCESS_DENIED_ERROR, the same number on MySQL and
// MariaDB, returned when the user lacks PROCESS.
const erSpecificAccessDenied = 1227

// erCannotConvertString is MySQL's ER_CANNOT_CONVERT_STRING. MySQL's INNODB_TRX and
// PROCESSLIST hold each session's statement as utf8mb3. A statement with a 4-byte character
// fails the whole read of either.
const erCannotConvertString = 3854

// ReadPurgeLag reports the oldest open transaction and the history list length. A user without
// the PROCESS privilege gets Known false and no error. Every other error is returned. InnoDB
// refreshes what INNODB_TRX shows only when it was last read over 100 ms ago, so calls closer
// together than that repeat the first answer.
func ReadPurgeLag(ctx context.Context, db DBTX) (PurgeLag, error) {
	var (
		lag       PurgeLag
		us        sql.NullInt64
		thread    sql.NullInt64
		denied    bool
		readError = func(what string, err error) (PurgeLag, error) {
			return PurgeLag{}, fmt.Errorf("outbox: ReadPurgeLag: %s: %w", what, explain(err))
		}
	)
	err := db.QueryRowContext(ctx, oldestTrxQuery).Scan(&us, &thread)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case isAccessDenied(err):
		denied = true
	case isCannotConvert(err):
		lag.TransactionsUnreadable = true
	case err != nil:
		return readError("oldest transaction", err)
	default:
		lag.OldestTransaction = time.Duration(max(us.Int64, 0)) * time.Microsecond
		lag.ThreadID = thread.Int64
		if lag.User, lag.Host, err = sessionOf(ctx, db, lag.ThreadID); err != nil {
			return readError("oldest transaction's session", err)
		}
	}
	var history sql.NullInt64
	err = db.QueryRowContext(ctx, historyQuery).Scan(&history)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case isAccessDenied(err):
		denied = true
	case err != nil:
		return readError("history list length", err)
	default:
		lag.HistoryLength = history.Int64
	}
	if denied {
		return PurgeLag{}, nil
	}
	lag.Known = true
	return lag, nil
}

// sessionOf is the user and host of a session. Both are empty when the session has ended, or
// when MySQL cannot show its PROCESSLIST because of a statement's characters.
func sessionOf(ctx context.Context, db DBTX, thread int64) (user, host string, err error) {
	var u, h sql.NullString
	err = db.QueryRowContext(ctx, sessionQuery, thread).Scan(&u, &h)
	switch {
	case errors.Is(err, sql.ErrNoRows), isCannotConvert(err):
		return "", "", nil
	case err != nil:
		return "", "", err
	}
	return u.String, h.String, nil
}

func isCannotConvert(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erCannotConvertString
}

func isAccessDenied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erSpecificAccessDenied
}

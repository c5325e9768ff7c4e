package outbox

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/internal/store"
)

// Once records the pair of consumer and key in outbox_inbox on tx and reports whether this is
// the first time. Call it inside the handler's own transaction, with d.IdempotencyKey, before
// the effects. If first is false, skip the effects and commit. The record commits or rolls back
// with the effects. So the handler's database effects happen at most once, even though delivery
// is at-least-once. A rolled-back transaction records nothing.
//
// consumer names the handler, so two handlers of one event deduplicate separately. consumer
// and key must be non-empty and at most 191 characters. Keys compare byte for byte. "in_1Ab"
// and "in_1aB" are different keys on every server, and so are "café" and "cafe", or "a" and
// "a ". The answer does not depend on the DSN's clientFoundRows.
//
// The key is kept at least until its expiry, stored with it: in a worker's handler, processed_at
// plus max(Config.Retention.Inbox, the handler's redelivery window), see Retention.Inbox;
// elsewhere, processed_at plus DefaultRetentionInbox. Retention then deletes it.
//
// Another transaction may hold the same consumer and key uncommitted. Once then waits for it,
// up to innodb_lock_wait_timeout. Then first is false if that transaction committed, and true
// if it rolled back.
func Once(ctx context.Context, tx DBTX, consumer, key string) (first bool, err error) {
	if consumer == "" || key == "" {
		return false, fmt.Errorf("outbox: Once: consumer %q and key %q must be non-empty", consumer, key)
	}
	if utf8.RuneCountInString(consumer) > 191 || utf8.RuneCountInString(key) > 191 {
		return false, errors.New("outbox: Once: consumer and key must be at most 191 characters")
	}
	err = q.InboxInsert(ctx, sdb(tx), store.InboxInsertParams{Consumer: consumer, IdemKey: key, KeepUs: inboxKeepUs(ctx)})
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &me) && me.Number == erDupEntry:
		return false, nil
	default:
		return false, fmt.Errorf("outbox: Once(%q, %q): %w", consumer, key, explain(err))
	}
}

// erDupEntry is ER_DUP_ENTRY, the same number on MySQL and MariaDB.
const erDupEntry = 1062

// The status line on InnoDB's purge: the oldest open transaction and the history list length.
// A long transaction holding a snapshot slows every claim, and status is where on-call looks.

package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxgen/outboxgen/internal/termesc"
	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// purgeReport is outbox.ReadPurgeLag in status --json.
type purgeReport struct {
	Known                    bool    `json:"known"`
	OldestTransactionSeconds float64 `json:"oldest_transaction_seconds"`
	ThreadID                 int64   `json:"thread_id"`
	User                     string  `json:"user"`
	Host                     string  `json:"host"`
	HistoryLength            int64   `json:"history_length"`
	// TransactionsUnreadable is outbox.PurgeLag's: MySQL could not list the transactions.
	TransactionsUnreadable bool `json:"transactions_unreadable"`
}

// longTransaction is the age from which status names the oldest transaction as holding purge.
const longTransaction = time.Minute

func (c *opsCmd) readPurge(ctx context.Context, db outbox.DBTX) (purgeReport, error) {
	lag, err := outbox.ReadPurgeLag(ctx, db)
	if err != nil {
		return purgeReport{}, err
	}
	return purgeReport{Known: lag.Known, OldestTransactionSeconds: lag.OldestTransaction.Seconds(), ThreadID: lag.ThreadID,
		User: c.jsonString(lag.User), Host: c.jsonString(lag.Host), HistoryLength: lag.HistoryLength,
		TransactionsUnreadable: lag.TransactionsUnreadable}, nil
}

// purgeLine is the text line of status. User and host are the server's text, kept inert.
func purgeLine(p purgeReport) string {
	const label = "oldest trx:"
	switch {
	case !p.Known:
		return fmt.Sprintf("%-17sunknown (reading it needs the PROCESS privilege)\n", label)
	case p.TransactionsUnreadable:
		return fmt.Sprintf("%-17sunknown (MySQL cannot list transactions while one runs a statement with an emoji or another 4-byte character; history list length %d)\n", label, p.HistoryLength)
	case p.ThreadID == 0:
		return fmt.Sprintf("%-17s- (history list length %d)\n", label, p.HistoryLength)
	}
	age := secondsAge(p.OldestTransactionSeconds)
	if age < longTransaction {
		return fmt.Sprintf("%-17s%s (history list length %d)\n", label, formatAge(age), p.HistoryLength)
	}
	who := termesc.Line(p.User) + "@" + termesc.Line(p.Host)
	if p.User == "" && p.Host == "" {
		who = "(user and host unknown)"
	}
	return fmt.Sprintf("%-17s%s, thread %d %s: InnoDB cannot purge while it is open, so claims slow down (history list length %d; see docs/operations.md \"A long transaction\")\n",
		label, formatAge(age), p.ThreadID, who, p.HistoryLength)
}

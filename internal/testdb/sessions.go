package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Session is one server session as SHOW FULL PROCESSLIST lists it.
type Session struct {
	ID   int64
	User string
	DB   string // "" when none is selected
	// Info is the statement in flight, as the server sent it, nil when idle. Compare it as
	// bytes: another session's statement may hold any text.
	Info []byte
}

// Sessions lists the server's sessions (those db's user may see) for tests that look for a
// statement or a session. It reads SHOW FULL PROCESSLIST, never information_schema.PROCESSLIST:
// MySQL fills that table's INFO column as utf8mb3 and fails the whole read (error 3854, "Cannot
// convert string ... from utf8mb4 to utf8mb3") while any session of the server, in any
// database, runs a statement holding a character outside utf8mb3, such as an emoji. Neither a
// WHERE on ID nor CAST(INFO AS BINARY) avoids it: the table is filled before either applies.
// Filter the result in Go.
func Sessions(ctx context.Context, db *sql.DB) ([]Session, error) {
	rows, err := db.QueryContext(ctx, "SHOW FULL PROCESSLIST")
	if err != nil {
		return nil, fmt.Errorf("SHOW FULL PROCESSLIST: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	// MySQL lists Id, User, Host, db, Command, Time, State, Info; MariaDB adds Progress.
	at := map[string]int{}
	for i, c := range cols {
		at[strings.ToLower(c)] = i
	}
	for _, c := range []string{"id", "user", "db", "info"} {
		if _, ok := at[c]; !ok {
			return nil, fmt.Errorf("SHOW FULL PROCESSLIST: no %s column in %q", c, cols)
		}
	}
	var out []Session
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		id, err := strconv.ParseInt(string(vals[at["id"]]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SHOW FULL PROCESSLIST: Id %q: %w", vals[at["id"]], err)
		}
		s := Session{ID: id, User: string(vals[at["user"]]), DB: string(vals[at["db"]])}
		if info := vals[at["info"]]; info != nil {
			s.Info = append([]byte{}, info...)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

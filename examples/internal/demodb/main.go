// Command demodb is scripts/demo's database helper: it gives the demo a database of its own and
// cleans up after it. It is not part of the public API.
//
//	demodb prepare SERVER_DSN [-user]    print "DSN created|existing"; refuse a database that holds tables;
//	                                     with -user (only on the demo's own server), connect as a new
//	                                     user with a random password and rights on that database only
//	demodb cleanup DSN created|existing  drop the database if the demo created it, else only the demo's tables
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultDatabase is used when the server DSN names no database.
const DefaultDatabase = "outboxgen_demo"

// demoTables are the tables a demo run creates: the outbox's own and the signup example's.
// Cleanup of a database the demo did not create drops exactly these, nothing else.
var demoTables = []string{"outbox_messages", "outbox_inbox", "outbox_job_runs", "companies", "users"}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demodb:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: demodb prepare SERVER_DSN [-user] | cleanup DSN created|existing")
	}
	switch cmd, dsn := args[0], args[1]; cmd {
	case "prepare":
		db, created, err := prepare(ctx, dsn)
		if err != nil {
			return err
		}
		if len(args) > 2 && args[2] == "-user" {
			if db, err = ownUser(ctx, dsn, db); err != nil {
				return err
			}
		}
		state := "existing"
		if created {
			state = "created"
		}
		_, err = fmt.Fprintln(out, db, state)
		return err
	case "cleanup":
		if len(args) < 3 {
			return errors.New("cleanup needs DSN and created|existing")
		}
		return cleanup(ctx, dsn, args[2] == "created")
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// prepare returns the DSN of the demo's database on the server of serverDSN, creating the
// database when it does not exist. A database that already holds tables is refused: a demo
// must never write into someone's data.
func prepare(ctx context.Context, serverDSN string) (dsn string, created bool, err error) {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return "", false, fmt.Errorf("parse DSN: %w", err)
	}
	name := cfg.DBName
	if name == "" {
		name = DefaultDatabase
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", false, err
	}
	defer admin.Close()

	var exists int
	if err := admin.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&exists); err != nil {
		return "", false, fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists == 0 {
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+strings.ReplaceAll(name, "`", "``")+"`"); err != nil {
			return "", false, fmt.Errorf("create database %s: %w", name, err)
		}
		created = true
	} else {
		var n int
		var tables sql.NullString
		if err := admin.QueryRowContext(ctx,
			"SELECT COUNT(*), GROUP_CONCAT(table_name ORDER BY table_name SEPARATOR ', ') FROM information_schema.tables WHERE table_schema = ?",
			name).Scan(&n, &tables); err != nil {
			return "", false, fmt.Errorf("list tables of %s: %w", name, err)
		}
		if n > 0 {
			return "", false, fmt.Errorf("database %s on %s already holds %d table(s) (%s); the demo only writes into an empty or new database: name another one in OUTBOX_DEMO_DSN, e.g. .../%s_2",
				name, cfg.Addr, n, tables.String, name)
		}
	}
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN(), created, nil
}

// ownUser creates a user with a random password and every right on dbDSN's database only, and
// returns dbDSN with that user. The demo's own server uses it, so the demo runs with least
// privilege, and its password (unlike the throwaway server's well-known one) never appears in
// ordinary output that the CLI scrubs passwords from.
func ownUser(ctx context.Context, serverDSN, dbDSN string) (string, error) {
	cfg, err := mysql.ParseDSN(dbDSN)
	if err != nil {
		return "", err
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	password := hex.EncodeToString(rnd[:])
	admin, err := sql.Open("mysql", serverDSN)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	host := "127.0.0.1"
	for _, stmt := range []string{
		"DROP USER IF EXISTS 'outboxgen_demo'@'" + host + "'",
		"CREATE USER 'outboxgen_demo'@'" + host + "' IDENTIFIED BY '" + password + "'",
		"GRANT ALL PRIVILEGES ON `" + strings.ReplaceAll(cfg.DBName, "`", "``") + "`.* TO 'outboxgen_demo'@'" + host + "'",
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			return "", fmt.Errorf("create the demo user: %w", err)
		}
	}
	cfg.User, cfg.Passwd = "outboxgen_demo", password
	return cfg.FormatDSN(), nil
}

// cleanup drops the database when the demo created it, or else only the demo's own tables.
func cleanup(ctx context.Context, dsn string, created bool) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse DSN: %w", err)
	}
	name := cfg.DBName
	if name == "" {
		return errors.New("cleanup: the DSN names no database")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	quote := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
	if created {
		_, err := db.ExecContext(ctx, "DROP DATABASE "+quote(name))
		return err
	}
	for _, t := range demoTables {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quote(t)); err != nil {
			return fmt.Errorf("drop %s.%s: %w", name, t, err)
		}
	}
	return nil
}

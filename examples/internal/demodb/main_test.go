package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestPrepareRefusesADatabaseWithTables(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)

	dsn, created, err := prepare(ctx, d.DSN)
	if err != nil {
		t.Fatalf("prepare on an empty database: %v", err)
	}
	if created {
		t.Errorf("prepare said it created %s, which already existed", d.Name)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.DBName != d.Name || !cfg.ParseTime {
		t.Fatalf("prepare returned %q (%v): want database %s with parseTime=true", dsn, err, d.Name)
	}

	d.MustExec(t, "CREATE TABLE customers (id INT PRIMARY KEY)")
	_, _, err = prepare(ctx, d.DSN)
	if err == nil || !strings.Contains(err.Error(), "customers") {
		t.Fatalf("prepare on a database holding table customers: err = %v, want a refusal naming the table", err)
	}

	// Cleanup of a database the demo did not create drops the demo's tables and nothing else.
	d.MustExec(t, "CREATE TABLE outbox_messages (id INT PRIMARY KEY)")
	if err := cleanup(ctx, dsn, false); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if got := tables(t, d.DB); got != "customers" {
		t.Errorf("tables after cleanup = %q, want only customers", got)
	}
}

func TestPrepareCreatesAndCleanupDropsItsOwnDatabase(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)
	cfg, err := mysql.ParseDSN(d.ServerDSN)
	if err != nil {
		t.Fatal(err)
	}
	name := d.Name + "_demo"
	cfg.DBName = name
	t.Cleanup(func() {
		if _, err := d.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})

	dsn, created, err := prepare(ctx, cfg.FormatDSN())
	if err != nil || !created {
		t.Fatalf("prepare(%s) = created %v, err %v; want created", name, created, err)
	}
	if err := cleanup(ctx, dsn, true); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	var n int
	if err := d.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after cleanup of a database the demo created", name)
	}
}

func tables(t *testing.T, db *sql.DB) string {
	t.Helper()
	var s sql.NullString
	if err := db.QueryRow("SELECT GROUP_CONCAT(table_name ORDER BY table_name) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s.String
}

func TestOwnUserHasRightsOnTheDemoDatabaseOnly(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)
	dsn, err := ownUser(ctx, d.ServerDSN, d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.Exec("DROP USER IF EXISTS 'outboxgen_demo'@'127.0.0.1'"); err != nil {
			t.Errorf("drop the demo user: %v", err)
		}
	})
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.User != "outboxgen_demo" || len(cfg.Passwd) != 24 || cfg.DBName != d.Name {
		t.Fatalf("ownUser returned %q (%v): want user outboxgen_demo, a 24-hex password, database %s", dsn, err, d.Name)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Errorf("the demo user cannot create a table in its database: %v", err)
	}
	if _, err := db.Exec("CREATE DATABASE `" + d.Name + "_other`"); err == nil {
		if _, err := d.Exec("DROP DATABASE `" + d.Name + "_other`"); err != nil {
			t.Errorf("drop %s_other: %v", d.Name, err)
		}
		t.Errorf("the demo user could create another database: want rights on its own only")
	}
}

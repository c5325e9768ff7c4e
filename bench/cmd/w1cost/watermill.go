// --watermill: watermill-sql's publish beside outbox.Enqueue, each on its own table.

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"
)

// watermillVariants: --watermill.
var watermillVariants bool

// watermillSetup creates watermill-sql's messages table as its DefaultMySQLSchema does (on
// Oracle MySQL with a LONGBLOB payload, as bench/cmd/outboxbench's watermill system has it).
func watermillSetup(ctx context.Context, db *sql.DB, version string) error {
	payloadType := "JSON"
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		payloadType = "LONGBLOB"
	}
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS `watermill_bench_events` (\n"+
		"`offset` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,\n"+
		"`uuid` VARCHAR(36) NOT NULL,\n"+
		"`created_at` TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"+
		"`payload` "+payloadType+" DEFAULT NULL,\n"+
		"`metadata` JSON DEFAULT NULL\n"+
		");")
	return err
}

// newUUID is a random UUID in text form, as watermill.NewUUID gives.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// watermillInsert is the statement watermill-sql's Publisher sends for one message, with its
// arguments: the uuid, the payload and the metadata (empty here, as the bench's).
func watermillInsert(payload []byte) variant {
	return variant{"watermill publish", "watermill-sql's INSERT of one message into its own table (placeholders, as its publisher sends it)", func(ctx context.Context, tx *sql.Tx, _ int) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO `watermill_bench_events` (uuid, payload, metadata) VALUES (?,?,?)", newUUID(), payload, "{}")
		return err
	}}
}

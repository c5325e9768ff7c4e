//go:build noworker

package main

import (
	"context"
	"database/sql"
	"errors"
)

// Built with -tags noworker while runtime/outbox has no Worker yet: W1 runs, consumers fail.
func (oursSystem) consume(context.Context, *sql.DB, consumerConfig, func([]byte)) (consumer, error) {
	return consumer{}, errors.New("outboxgen: built with -tags noworker")
}

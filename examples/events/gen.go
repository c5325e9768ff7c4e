// Package events is the code outboxgen generates from the repository's events.yaml: the
// seed's welcome mail, the failed-payment notice and the direct ops alert, and an order's
// placed, paid and shipped events, ordered per order. The examples use it;
// gen/example_test.go fails when it is stale.
package events

//go:generate go run ../../cmd/outboxgen generate -f ../../events.yaml

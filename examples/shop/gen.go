package shop

//go:generate go run ../../cmd/outboxgen generate -f events.yaml

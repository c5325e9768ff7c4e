module github.com/outboxgen/outboxgen/runtime/outboxkafka

go 1.24.0

require (
	github.com/outboxgen/outboxgen v0.3.0
	github.com/twmb/franz-go v1.20.7
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20251021232020-dd73f6664175
	github.com/twmb/franz-go/pkg/kmsg v1.12.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/klauspost/compress v1.18.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.25 // indirect
	golang.org/x/crypto v0.48.0 // indirect
)

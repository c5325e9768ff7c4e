module github.com/outboxgen/outboxgen/scripts/releasecheck

go 1.24.0

require golang.org/x/mod v0.24.0

// Package outboxtest is outboxgen's test kit: what a service's tests need to check what they
// enqueue and what their handlers do, on a real MySQL or MariaDB server, in a few lines.
//
//   - Open gives a test a fresh database with the outboxgen tables, dropped when the test ends,
//     on the server that OUTBOX_TEST_DSN names; Reset empties every outboxgen table, for tests
//     that share a database.
//   - Enqueued reads the messages of one generated payload type, decoded exactly as the worker
//     decodes them for their handler; RequireEnqueued fails the test, with a field-by-field
//     diff, unless one of them equals the payload the test expects. Both read through the
//     handle they are given, so they see the test's own uncommitted transaction.
//   - Drain delivers every due message synchronously, through the worker's own claim, handler
//     call and result writes, then the messages its handlers enqueued, until none is due, and
//     says how many were sent, retried and failed. RetriesNow makes a retry due at once
//     instead of after its backoff.
//
// Enqueued and RequireEnqueued find a payload type's decoder through the DecodeOutboxPayload
// method that outboxgen generates on its pointer, so generated code never imports package
// testing. See docs/testing.md in the outboxgen repository for the tests a team writes first.
package outboxtest

// Module outboxorm holds what outboxgen needs beside the Go ORMs, so that the root module
// depends on none of them. database/sql, sqlx, GORM and bun need no code: their transactions
// are (or hold) a *sql.Tx or a handle outbox.Enqueue takes as it is (docs/orms.md shows the
// line for each). ent needs package outboxent. The module's tests run the generated EnqueueX
// inside each ORM's transaction on a real server.
package outboxorm

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

// TestNewcomerFlow follows docs/setup.md's "Install" in a fresh host module:
// go mod edit (require + replace to this checkout + tool, the documented local-clone form), go
// mod tidy, an events.yaml with the documented //go:generate line, go generate, go build, then
// a program that enqueues in a transaction and runs a worker that delivers to the typed
// handler on the test database. Modules come from the module cache or the machine's GOPROXY;
// the checksum database is not reachable from the test machines, so GOSUMDB=off, with go.sum
// seeded from this repository's (the hashes `go get` would have recorded).
func TestNewcomerFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the end-to-end newcomer flow (it builds a module)")
	}
	db := testdb.New(t) // skips, saying why, when OUTBOX_TEST_DSN is unset
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOSUMDB=off", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local", "SHOP_DSN="+db.DSN)
	step := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	write("go.mod", "module example.com/shop\n\ngo 1.24\n")
	// The checksums of outboxgen's dependencies, as `go get` would have recorded them.
	sums, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sums))
	step("mod", "edit", "-require=github.com/outboxgen/outboxgen@v0.0.0", "-replace=github.com/outboxgen/outboxgen="+repo,
		"-tool=github.com/outboxgen/outboxgen/cmd/outboxgen")
	step("mod", "tidy")
	write("events/events.yaml", newcomerCatalog)
	write("events/doc.go", "// Package events holds the shop's outbox events.\npackage events\n\n//go:generate go tool outboxgen generate -f events.yaml\n")
	write("main.go", newcomerProgram)
	step("mod", "tidy")
	step("generate", "./...")
	if _, err := os.Stat(filepath.Join(dir, "events", "outbox_gen.go")); err != nil {
		t.Fatalf("go generate did not write events/outbox_gen.go: %v", err)
	}
	step("build", "./...")
	if out := step("tool", "outboxgen", "diff", "-f", "events/events.yaml"); out != "" {
		t.Fatalf("outboxgen diff right after go generate is not empty:\n%s", out)
	}
	out := step("run", ".")
	t.Logf("program output:\n%s", out)
	for _, want := range []string{
		"delivered company_id=42 email=owner@acme.test key=welcome_email:2:42 attempt=1",
		"undecodable payload: FAILED",
		"permanent: welcome_email: decode payload: json: cannot unmarshal string into Go struct field WelcomeEmail.company_id",
		"rolled back signup: not delivered",
		"rows in outbox_messages: 2",
		"direct alert handled: db_write attempt=2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("program output lacks %q", want)
		}
	}
}

const newcomerCatalog = `version: 1
package: events
events:
  welcome_email:
    description: Sent once after a company signs up.
    fields:
      company_id: int64
      email: string
    idempotency_key: [company_id]
  ops_alert:
    delivery: direct
    fields: {kind: string}
`

const newcomerProgram = `package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/outboxgen/outboxgen/runtime/outbox"

	"example.com/shop/events"
)

type handlers struct{ got chan struct {
	e events.WelcomeEmail
	d outbox.Delivery
} }

func (h handlers) HandleWelcomeEmail(ctx context.Context, e events.WelcomeEmail, d outbox.Delivery) error {
	h.got <- struct {
		e events.WelcomeEmail
		d outbox.Delivery
	}{e, d}
	return nil
}

type pager struct{ calls int }

func (p *pager) HandleOpsAlert(ctx context.Context, e events.OpsAlert, d outbox.Delivery) error {
	p.calls++
	if d.Attempt == 1 {
		return errors.New("pager busy")
	}
	fmt.Printf("direct alert handled: %s attempt=%d\n", e.Kind, d.Attempt)
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", os.Getenv("SHOP_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := outbox.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	// A signup that commits: its welcome mail is delivered.
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		_, err := events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: 42, Email: "owner@acme.test"})
		return err
	}); err != nil {
		log.Fatal(err)
	}
	// A signup that rolls back: nothing is sent.
	errSignup := errors.New("signup failed")
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := events.EnqueueWelcomeEmail(ctx, tx, events.WelcomeEmail{CompanyID: 43, Email: "x@y.test"}); err != nil {
			return err
		}
		return errSignup
	}); !errors.Is(err, errSignup) {
		log.Fatalf("rollback: %v", err)
	}
	// A stored payload that does not match the struct fails permanently.
	var badID outbox.MessageID
	if err := outbox.InTx(ctx, db, func(tx *sql.Tx) error {
		var err error
		badID, err = outbox.Enqueue(ctx, tx, outbox.Message{EventType: "welcome_email", Payload: json.RawMessage(` + "`" + `{"company_id":"forty-two"}` + "`" + `)})
		return err
	}); err != nil {
		log.Fatal(err)
	}

	h := handlers{got: make(chan struct {
		e events.WelcomeEmail
		d outbox.Delivery
	}, 10)}
	w, err := outbox.NewWorker(db, events.NewRouter(h), outbox.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()

	select {
	case got := <-h.got:
		fmt.Printf("delivered company_id=%d email=%s key=%s attempt=%d\n", got.e.CompanyID, got.e.Email, got.d.IdempotencyKey, got.d.Attempt)
	case <-ctx.Done():
		log.Fatal("no delivery within 60s")
	}
	for {
		var status string
		var lastErr sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT status, last_error FROM outbox_messages WHERE id = ?", badID).Scan(&status, &lastErr); err != nil {
			log.Fatal(err)
		}
		if status == "FAILED" {
			fmt.Printf("undecodable payload: %s %s\n", status, lastErr.String)
			break
		}
		select {
		case <-ctx.Done():
			log.Fatalf("the undecodable payload is still %s", status)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	select {
	case got := <-h.got:
		log.Fatalf("a second delivery: %+v", got)
	default:
		fmt.Println("rolled back signup: not delivered")
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rows in outbox_messages: %d\n", n)

	// A direct event never touches the database: it works with the pool closed.
	db.Close()
	p := &pager{}
	if err := events.SendOpsAlert(ctx, p, events.OpsAlert{Kind: "db_write"}); err != nil {
		log.Fatal(err)
	}
}
`

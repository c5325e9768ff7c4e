package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
	"github.com/outboxgen/outboxgen/runtime/incident"
)

func TestParseSchemaComment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		comment      string
		version, min int
		bad          bool
	}{
		{comment: "", version: 1, min: 1},
		{comment: "orders outbox", version: 1, min: 1},
		{comment: "outboxgen schema 4", version: 4, min: 4},
		{comment: "outboxgen schema 4 min 4", version: 4, min: 4},
		{comment: "outboxgen schema 5 min 4", version: 5, min: 4},
		{comment: "outboxgen schema 12 min 1", version: 12, min: 1},
		{comment: "outboxgen schema 5 min 6", bad: true},
		{comment: "outboxgen schema 5 min 0", bad: true},
		{comment: "outboxgen schema 0", bad: true},
		{comment: "outboxgen schema 5 min", bad: true},
		{comment: "outboxgen schema 5 since 4", bad: true},
		{comment: "outboxgen schema 5 min 4 ", bad: true},
		{comment: "outboxgen schema 9999999999", bad: true},
		{comment: "outboxgen schema 5\n min 4", bad: true},
	} {
		s, err := parseSchemaComment("outbox_messages", c.comment)
		switch {
		case c.bad && err == nil:
			t.Errorf("COMMENT %q: read as version %d min %d, want an error", c.comment, s.Version, s.Min)
		case c.bad && strings.Contains(err.Error(), "\n"):
			t.Errorf("COMMENT %q: the error spans lines: %q", c.comment, err)
		case !c.bad && (err != nil || s.Version != c.version || s.Min != c.min):
			t.Errorf("COMMENT %q: version %d min %d (%v), want version %d min %d", c.comment, s.Version, s.Min, err, c.version, c.min)
		}
	}
}

// markAll sets every outboxgen table's COMMENT.
func markAll(t *testing.T, d *testdb.DB, comment string) {
	t.Helper()
	names, err := schemaNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		d.MustExec(t, fmt.Sprintf("ALTER TABLE %s COMMENT = '%s'", n, comment))
	}
}

func schemaTestRouter(h HandlerFunc) *Router {
	r := NewRouter()
	r.Handle("schema.e", Policy{}, h)
	return r
}

// A worker refuses at NewWorker a table that needs a newer outboxgen, naming both versions: the
// min the COMMENT names, or its version when it names none, or a mark it cannot read.
func TestNewWorkerRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	next := SchemaVersion + 1
	for _, c := range []struct {
		comment string
		want    string
	}{
		{fmt.Sprintf("outboxgen schema %d min %d", next, next),
			fmt.Sprintf("table outbox_inbox is at schema version %d, newer than this outboxgen's %d: only outboxgen schema version %d or later may run on it", next, SchemaVersion, next)},
		{fmt.Sprintf("outboxgen schema %d", next),
			fmt.Sprintf("table outbox_inbox is at schema version %d, newer than this outboxgen's %d: only outboxgen schema version %d or later may run on it (a COMMENT without min allows its own version and later)", next, SchemaVersion, next)},
		{fmt.Sprintf("outboxgen schema %d min %d", next+2, next+1),
			fmt.Sprintf("table outbox_inbox is at schema version %d (min %d), newer than this outboxgen's %d", next+2, next+1, SchemaVersion)},
		{fmt.Sprintf("outboxgen schema %d min %d rows", next, SchemaVersion),
			fmt.Sprintf("table outbox_inbox has COMMENT \"outboxgen schema %d min %d rows\", which this outboxgen (schema version %d) cannot read", next, SchemaVersion, SchemaVersion)},
	} {
		t.Run(c.comment, func(t *testing.T) {
			t.Parallel()
			d := migrated(t)
			// One table is enough: the worker reads them all.
			d.MustExec(t, fmt.Sprintf("ALTER TABLE outbox_inbox COMMENT = '%s'", c.comment))
			_, err := NewWorker(d.DB, schemaTestRouter(func(context.Context, json.RawMessage, Delivery) error { return nil }), fastConfig(Config{}))
			if err == nil || !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewWorker on a table marked %q: err = %v\nwant ErrSchemaTooNew and %q", c.comment, err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error spans lines: %q", err)
			}
			// Migrate of this outboxgen refuses it too, and changes nothing.
			merr := Migrate(context.Background(), d.DB)
			if merr == nil || !errors.Is(merr, ErrSchemaTooNew) || !strings.Contains(merr.Error(), c.want) {
				t.Errorf("Migrate on a table marked %q: err = %v\nwant ErrSchemaTooNew and %q", c.comment, merr, c.want)
			}
			if got := tableVersions(t, d)["outbox_inbox"]; got != c.comment {
				t.Errorf("after the refusals the COMMENT is %q, want %q untouched", got, c.comment)
			}
		})
	}
}

// A newer table whose COMMENT lets this version run on it (an additive change) starts a worker
// that delivers, and Migrate of this version leaves it as it is: old instances of a rolling
// deploy keep working. So does a current table marked with its min.
func TestWorkerRunsOnAdditiveNewerSchema(t *testing.T) {
	t.Parallel()
	for _, comment := range []string{
		fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion+1, SchemaVersion),
		fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion, SchemaVersion),
	} {
		t.Run(comment, func(t *testing.T) {
			t.Parallel()
			d := migrated(t)
			markAll(t, d, comment)
			ctx := context.Background()
			if err := Migrate(ctx, d.DB); err != nil {
				t.Fatalf("Migrate on tables marked %q: %v", comment, err)
			}
			if stmts, err := SchemaUpgrade(ctx, d.DB); err != nil || len(stmts) != 0 {
				t.Errorf("SchemaUpgrade on tables marked %q: %q, %v; want nothing to do", comment, stmts, err)
			}
			for table, got := range tableVersions(t, d) {
				if got != comment {
					t.Errorf("Migrate changed table %s's COMMENT to %q, want %q", table, got, comment)
				}
			}
			delivered := make(chan MessageID, 1)
			w := newTestWorker(t, d.DB, schemaTestRouter(func(_ context.Context, _ json.RawMessage, dl Delivery) error {
				delivered <- dl.MessageID
				return nil
			}), Config{})
			start(t, w)
			ids := enqueueN(t, d.DB, "schema.e", 1)
			select {
			case id := <-delivered:
				if id != ids[0] {
					t.Errorf("delivered %d, want %d", id, ids[0])
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no delivery within 10s on tables marked %q", comment)
			}
		})
	}
}

// countingObserver counts maintenance passes (each calls Reclaimed once).
type countingObserver struct {
	NopObserver
	passes atomic.Int64
}

func (o *countingObserver) Reclaimed(int64) { o.passes.Add(1) }

// A running worker that sees a table re-marked for a newer outboxgen stops claiming (neither a
// claim nor InTx's hand-off takes a message), reports one incident naming both versions, and
// claims again when the mark goes back.
func TestWorkerStopsClaimingWhenSchemaTurnsNewer(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	inc := &incidents{}
	obs := &countingObserver{}
	delivered := make(chan MessageID, 10)
	w := newTestWorker(t, d.DB, schemaTestRouter(func(_ context.Context, _ json.RawMessage, dl Delivery) error {
		delivered <- dl.MessageID
		return nil
	}), Config{Reporter: inc, Observer: obs, ReclaimInterval: 20 * time.Millisecond})
	start(t, w)
	first := enqueueN(t, d.DB, "schema.e", 1)[0]
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery before the re-mark")
	}

	next := SchemaVersion + 1
	d.MustExec(t, fmt.Sprintf("ALTER TABLE outbox_messages COMMENT = 'outboxgen schema %d min %d'", next, next))
	testutil.Eventually(t, 10*time.Second, "the schema incident", func() bool { return inc.count(incident.SchemaTooNew) > 0 })
	in := inc.first(incident.SchemaTooNew)
	want := fmt.Sprintf("table outbox_messages is at schema version %d, newer than this outboxgen's %d", next, SchemaVersion)
	if in.Err == nil || !strings.Contains(in.Err.Error(), want) || !strings.Contains(in.Err.Error(), "stops claiming") {
		t.Errorf("incident %+v, want it to say the worker stops claiming and %q", in, want)
	}
	// Enqueued through InTx in this process, so the hand-off is offered too; then the worker
	// gets a few maintenance passes and many polls in which it must take nothing.
	claims := w.claims.Load()
	held := enqueueN(t, d.DB, "schema.e", 1)[0]
	w.Wake()
	from := obs.passes.Load()
	testutil.Eventually(t, 10*time.Second, "five maintenance passes", func() bool { return obs.passes.Load() >= from+5 })
	if st := statusOf(t, d, held); st != "PENDING" {
		t.Errorf("message enqueued after the re-mark is %s, want PENDING (the worker must not take it)", st)
	}
	if n := w.claims.Load(); n != claims {
		t.Errorf("%d claims after the incident, want none", n-claims)
	}
	select {
	case id := <-delivered:
		t.Errorf("message %d delivered after the re-mark", id)
	default:
	}
	if n := inc.count(incident.SchemaTooNew); n != 1 {
		t.Errorf("%d schema incidents over several passes, want 1 (reported once while it lasts)", n)
	}

	// The mark goes back (the migration was rolled back): the worker claims again.
	d.MustExec(t, fmt.Sprintf("ALTER TABLE outbox_messages COMMENT = 'outboxgen schema %d'", SchemaVersion))
	select {
	case id := <-delivered:
		if id != held {
			t.Errorf("delivered %d after the mark went back, want %d", id, held)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s after the mark went back")
	}
	if st := statusOf(t, d, first); st != "SENT" {
		t.Errorf("the first message is %s, want SENT", st)
	}
}

// TableSchemas reads each table's version and min; a missing table is reported as such.
func TestTableSchemas(t *testing.T) {
	t.Parallel()
	d := migrated(t)
	d.MustExec(t, fmt.Sprintf("ALTER TABLE outbox_inbox COMMENT = 'outboxgen schema %d min %d'", SchemaVersion+1, SchemaVersion))
	d.MustExec(t, "DROP TABLE outbox_job_runs")
	got, err := TableSchemas(context.Background(), d.DB)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := schemaNames()
	if len(got) != len(names) {
		t.Fatalf("TableSchemas: %d tables, want %d", len(got), len(names))
	}
	for i, s := range got {
		want := TableSchema{Table: names[i], Exists: true, Version: SchemaVersion, Min: currentMin,
			Comment: fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion, currentMin), minNamed: true}
		switch names[i] {
		case "outbox_inbox":
			want.Version, want.Min = SchemaVersion+1, SchemaVersion
			want.Comment = fmt.Sprintf("outboxgen schema %d min %d", SchemaVersion+1, SchemaVersion)
			want.minNamed = true
		case "outbox_job_runs":
			want = TableSchema{Table: names[i]}
		}
		if s != want {
			t.Errorf("TableSchemas[%d] = %+v, want %+v", i, s, want)
		}
		if !s.Compatible() {
			t.Errorf("%s: not compatible, want compatible", s.Table)
		}
	}
}

// Tables of one mark share one reason, so a refusal stays one short line.
func TestIncompatibleGroupsTables(t *testing.T) {
	t.Parallel()
	n1, n2 := SchemaVersion+1, SchemaVersion+2
	var schemas []TableSchema
	for _, c := range []struct{ table, comment string }{
		{"outbox_messages", fmt.Sprintf("outboxgen schema %d min %d", n2, n1)},
		{"outbox_inbox", fmt.Sprintf("outboxgen schema %d min %d", n2, n1)},
		{"outbox_job_runs", fmt.Sprintf("outboxgen schema %d min %d", n2, n2)},
		{"outbox_ordering", fmt.Sprintf("outboxgen schema %d", SchemaVersion)},
	} {
		s, err := parseSchemaComment(c.table, c.comment)
		if err != nil {
			t.Fatal(err)
		}
		schemas = append(schemas, s)
	}
	schemas = append(schemas, TableSchema{Table: "outbox_ordering_queue"})
	err := incompatible(schemas)
	want := fmt.Sprintf("the outboxgen tables need a newer outboxgen: tables outbox_messages, outbox_inbox are at schema version %d (min %d), newer than this outboxgen's %d: only outboxgen schema version %d or later may run on them; "+
		"table outbox_job_runs is at schema version %d, newer than this outboxgen's %d: only outboxgen schema version %d or later may run on it; deploy the newer outboxgen",
		n2, n1, SchemaVersion, n1, n2, SchemaVersion, n2)
	if err == nil || err.Error() != want || !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("incompatible:\n got %v\nwant %s", err, want)
	}
}

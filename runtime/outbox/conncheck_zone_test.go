package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/internal/testdb"
	"github.com/outboxgen/outboxgen/internal/testutil"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s: %v (the test needs the system's tzdata)", name, err)
	}
	return loc
}

// A zone is accepted when its offset is zero at every instant from 1900 to 2200; the refusal
// names the zone, its offset and the instant nearest now at which it has it.
func TestCheckZone(t *testing.T) {
	winter := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	summer := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		loc  *time.Location
		now  time.Time
		want []string // nil: accepted
	}{
		{"UTC", time.UTC, winter, nil},
		{"a fixed zone of offset zero", time.FixedZone("X", 0), winter, nil},
		{"Etc/UTC", mustZone(t, "Etc/UTC"), winter, nil},
		{"Etc/GMT", mustZone(t, "Etc/GMT"), summer, nil},
		{"Europe/London in winter", mustZone(t, "Europe/London"), winter,
			[]string{`"Europe/London"`, "UTC+01:00 (BST) at 2027-03-28T01:00:00Z", "loc=UTC"}},
		{"Europe/London in summer", mustZone(t, "Europe/London"), summer,
			[]string{`"Europe/London"`, "UTC+01:00 (BST) now", "loc=UTC"}},
		{"Asia/Tokyo", mustZone(t, "Asia/Tokyo"), winter, []string{`"Asia/Tokyo"`, "UTC+09:00 (JST) now"}},
		{"a fixed zone an hour behind", time.FixedZone("Y", -3600), winter, []string{`"Y"`, "UTC-01:00 (Y) now"}},
		// Zero now and ever after, but not before 1968: found by walking back.
		{"Atlantic/Reykjavik", mustZone(t, "Atlantic/Reykjavik"), winter, []string{`"Atlantic/Reykjavik"`, "UTC-"}},
	} {
		err := checkZone(c.loc, c.now)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want it accepted", c.name, err)
		case c.want != nil && err == nil:
			t.Errorf("%s: accepted, want it refused", c.name)
		case c.want != nil:
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v, want it to say %s", c.name, err, w)
				}
			}
		}
	}
	err := checkZone(time.Local, winter)
	if _, off := winter.In(time.Local).Zone(); off != 0 && (err == nil || !strings.Contains(err.Error(), "TZ=UTC")) {
		t.Errorf("loc=Local in a zone of offset %d: %v, want it to name TZ=UTC", off, err)
	}
}

// zonePool opens d's database with the driver reading and writing times in loc.
func zonePool(t *testing.T, d *testdb.DB, loc *time.Location) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Loc = loc
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// A DSN whose zone is UTC under another name is accepted, and the runtime reads and writes
// the same instants through it as through loc=UTC; a zone with another offset is refused by
// Migrate and NewWorker alike.
func TestDSNZoneOfOffsetZeroIsAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"Etc/UTC", "Etc/UCT", "fixed"} {
		t.Run(name, func(t *testing.T) {
			loc := time.FixedZone("X", 0)
			if name != "fixed" {
				loc = mustZone(t, name)
			}
			d := testdb.New(t)
			db := zonePool(t, d, loc)
			if err := Migrate(ctx, db); err != nil {
				t.Fatalf("Migrate with loc=%s: %v", loc, err)
			}
			delivered := make(chan Delivery, 1)
			r := NewRouter()
			r.Handle("zoned", Policy{}, func(_ context.Context, _ json.RawMessage, dv Delivery) error {
				delivered <- dv
				return nil
			})
			w := newTestWorker(t, db, r, Config{})
			before := time.Now()
			id, err := Enqueue(ctx, db, Message{EventType: "zoned", Payload: []byte(`{}`)}, Standalone())
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, w)
			var dv Delivery
			select {
			case dv = <-delivered:
			case <-time.After(30 * time.Second):
				t.Fatal("not delivered within 30s")
			}
			testutil.Eventually(t, 10*time.Second, "message SENT", func() bool {
				rec, err := Inspect(ctx, db, id)
				return err == nil && rec.Status == StatusSent
			})
			stop()
			after := time.Now()
			zoned, err := Inspect(ctx, db, id)
			if err != nil {
				t.Fatal(err)
			}
			utc, err := Inspect(ctx, d.DB, id)
			if err != nil {
				t.Fatal(err)
			}
			// The database clock is this machine's: a shifted read would be hours off.
			if dv.EnqueuedAt.Before(before.Add(-time.Second)) || dv.EnqueuedAt.After(after.Add(time.Second)) {
				t.Errorf("Delivery.EnqueuedAt = %v, want between %v and %v", dv.EnqueuedAt, before, after)
			}
			for _, c := range []struct {
				what       string
				got, wantT time.Time
			}{
				{"Delivery.EnqueuedAt", dv.EnqueuedAt, utc.CreatedAt},
				{"CreatedAt", zoned.CreatedAt, utc.CreatedAt},
				{"SentAt", zoned.SentAt, utc.SentAt},
				{"ClaimedAt", zoned.ClaimedAt, utc.ClaimedAt},
				{"NextAttemptAt", zoned.NextAttemptAt, utc.NextAttemptAt},
			} {
				if c.wantT.IsZero() || !c.got.Equal(c.wantT) {
					t.Errorf("%s through loc=%s = %v, through loc=UTC %v: want the same instant", c.what, loc, c.got, c.wantT)
				}
			}
		})
	}
	for _, name := range []string{"Europe/London", "Asia/Tokyo"} {
		t.Run(name, func(t *testing.T) {
			d := testdb.Migrated(t)
			db := zonePool(t, d, mustZone(t, name))
			r := NewRouter()
			r.Handle("zoned", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
			_, werr := NewWorker(db, r, fastConfig(Config{}))
			merr := Migrate(ctx, db)
			for what, err := range map[string]error{"NewWorker": werr, "Migrate": merr} {
				if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), "loc=UTC") {
					t.Errorf("%s with loc=%s: %v, want it refused naming the zone and loc=UTC", what, name, err)
				}
			}
		})
	}
}

// envLocalChild makes the test binary run TestDSNLocLocalFollowsTZ as the child: its value is
// the DSN to open with loc=Local.
const envLocalChild = "OUTBOX_TEST_LOC_LOCAL_DSN"

// loc=Local is accepted where the process's zone (TZ) has a zero offset at every instant, and
// refused naming the zone and TZ=UTC where it has not. time.Local is read once per process, so each zone
// runs in a child process of the test binary.
func TestDSNLocLocalFollowsTZ(t *testing.T) {
	if dsn := os.Getenv(envLocalChild); dsn != "" {
		db, err := sql.Open("mysql", dsn+"&loc=Local")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		r := NewRouter()
		r.Handle("zoned", Policy{}, func(context.Context, json.RawMessage, Delivery) error { return nil })
		_, werr := NewWorker(db, r, fastConfig(Config{}))
		merr := Migrate(context.Background(), db)
		t.Logf("NewWorker: %v", werr)
		t.Logf("Migrate: %v", merr)
		return
	}
	t.Parallel()
	d := testdb.Migrated(t)
	if strings.Contains(d.DSN, "loc=") {
		t.Fatalf("test DSN %q already sets loc", d.DSN)
	}
	for tz, want := range map[string]string{
		"UTC":           "",
		"Etc/UTC":       "",
		"Europe/London": `zone "Europe/London" is UTC+01:00 (BST)`,
		"Asia/Tokyo":    `zone "Asia/Tokyo" is UTC+09:00 (JST) now`,
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDSNLocLocalFollowsTZ$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envLocalChild+"="+d.DSN, "TZ="+tz)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("TZ=%s: child: %v\n%s", tz, err, out)
		}
		for _, call := range []string{"NewWorker", "Migrate"} {
			line := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, call+": ") {
					line = l
				}
			}
			switch {
			case want == "" && !strings.HasSuffix(line, call+": <nil>"):
				t.Errorf("TZ=%s, loc=Local: %s: %q, want it accepted", tz, call, line)
			case want != "" && (!strings.Contains(line, want) || !strings.Contains(line, "TZ=UTC")):
				t.Errorf("TZ=%s, loc=Local: %s: %q, want it refused with %s and naming TZ=UTC", tz, call, line, want)
			}
		}
	}
}

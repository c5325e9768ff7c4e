package main

import (
	"context"
	"database/sql"
	"io"
	"os"
	"testing"
	"time"
)

func TestPayloadTS(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	got, ok := payloadTS(makePayload(42, at))
	if !ok || got != at.UnixNano() {
		t.Fatalf("payloadTS = %d, %v; want %d", got, ok, at.UnixNano())
	}
	for _, bad := range []string{"", `{"seq":1}`, `{"seq":1,"ts":x,"pad":""}`} {
		if _, ok := payloadTS([]byte(bad)); ok {
			t.Errorf("payloadTS(%q): ok", bad)
		}
	}
}

func TestRetentionSizesFromFlags(t *testing.T) {
	o, err := parseFlags([]string{"--dsn", "x", "--only", "history,steady", "--history-rows", "20000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.sz.Ret.HistoryRows != 20000 || o.sz.Ret.Backlog != fullRet.Backlog || o.sz.Ret.SteadyDur != fullRet.SteadyDur {
		t.Errorf("full sizes with --history-rows: %+v", o.sz.Ret)
	}
	o, err = parseFlags([]string{"--dsn", "x", "--smoke", "--steady-rate", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.sz.Ret.SteadyRate != 50 || o.sz.Ret.Backlog != smokeRet.Backlog {
		t.Errorf("smoke sizes with --steady-rate: %+v", o.sz.Ret)
	}
	// The default run leaves the retention workloads out.
	for _, w := range o.only {
		if isRetentionWorkload(w) {
			t.Errorf("default --only includes %s", w)
		}
	}
}

func isRetentionWorkload(w string) bool {
	for _, r := range retWorkloadNames {
		if r == w {
			return true
		}
	}
	return false
}

// TestSteadyWindows checks which samples count as the first and the last window and as the two
// halves after the warm-up.
func TestSteadyWindows(t *testing.T) {
	rs := retSizes{SteadyRate: 10, SteadyDur: 5 * time.Minute, SteadyKeep: 30 * time.Second, SteadyClean: 10 * time.Second, SteadyEvery: 10 * time.Second}
	var samples []steadySample
	for at := rs.SteadyEvery; at <= rs.SteadyDur; at += rs.SteadyEvery {
		// Claims and lags name their sample's second; rows grow with time.
		s := float64(at / time.Second)
		samples = append(samples, steadySample{at: at, rows: int64(s), claims: []float64{s}, lags: []float64{s}})
	}
	if got := halfMax(samples, rs, true); got != 170 {
		t.Errorf("first half after warm-up: max rows %d, want 170 (warm-up 40 s, half way at 170 s)", got)
	}
	if got := halfMax(samples, rs, false); got != 300 {
		t.Errorf("second half: max rows %d, want 300", got)
	}
	rows := steadyResults(rs, samples, 0)
	byName := map[string]float64{}
	for _, r := range rows {
		byName[r.Workload[len(steadyLabel(rs))+2:]] = r.Value
	}
	// The first minute is the samples at 10..60 s, the last minute those at 250..300 s.
	if byName["claim p99, first window"] != 60 || byName["claim p99, last window"] != 300 {
		t.Errorf("windows: %v", byName)
	}
	if byName["max rows"] != 300 || byName["lag max"] != 300 {
		t.Errorf("maxima: %v", byName)
	}
}

func TestHistoryLengthPattern(t *testing.T) {
	status := "------------\nTRANSACTIONS\n------------\nTrx id counter 1234\nPurge done for trx's n:o < 1200 undo n:o < 0 state: running\nHistory list length 5678\n"
	m := historyLenRE.FindStringSubmatch(status)
	if m == nil || m[1] != "5678" {
		t.Fatalf("History list length not found: %v", m)
	}
}

// TestFillRows checks the filler on a server: exactly n rows of the status asked, sent (or
// due) the given time ago, for an n that is not a power of two of the seed.
func TestFillRows(t *testing.T) {
	dsn := os.Getenv("OUTBOX_TEST_DSN")
	if dsn == "" {
		t.Skip("OUTBOX_TEST_DSN not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := runEnv{srv: server{dsn: dsn}, mode: dsnModes[0]}
	err := e.withDB(ctx, "filltest", oursSystem{}, func(_ string, db *sql.DB) error {
		first, err := fillRows(ctx, db, 5003, "SENT", backlogAge)
		if err != nil {
			return err
		}
		if _, err := fillRows(ctx, db, 7, "PENDING", time.Hour); err != nil {
			return err
		}
		var sent, pending, oldSent, minID int64
		err = db.QueryRowContext(ctx, `SELECT COALESCE(SUM(status = 'SENT'), 0), COALESCE(SUM(status = 'PENDING'), 0),
			COALESCE(SUM(status = 'SENT' AND sent_at < UTC_TIMESTAMP(6) - INTERVAL 47 HOUR AND sent_at IS NOT NULL), 0), MIN(id)
			FROM outbox_messages`).Scan(&sent, &pending, &oldSent, &minID)
		if err != nil {
			return err
		}
		if sent != 5003 || pending != 7 || oldSent != 5003 || minID != first {
			t.Errorf("filled: %d SENT (%d sent over 47 h ago), %d PENDING, first id %d (returned %d); want 5003 (5003), 7", sent, oldSent, pending, minID, first)
		}
		var nullSent int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages WHERE status = 'PENDING' AND sent_at IS NULL").Scan(&nullSent); err != nil {
			return err
		}
		if nullSent != 7 {
			t.Errorf("PENDING rows with sent_at NULL: %d, want 7", nullSent)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

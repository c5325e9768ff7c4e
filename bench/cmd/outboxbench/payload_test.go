package main

import (
	"encoding/json"
	"testing"
	"time"
)

func TestPayloadIs200BytesOfJSONWithSeqAndTimestamp(t *testing.T) {
	for _, seq := range []int64{0, 7, 199999, 1 << 40} {
		now := time.Now()
		p := makePayload(seq, now)
		if len(p) != payloadSize {
			t.Fatalf("seq %d: payload is %d bytes, want %d", seq, len(p), payloadSize)
		}
		var v struct {
			Seq int64 `json:"seq"`
			TS  int64 `json:"ts"`
		}
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("seq %d: not JSON: %v\n%s", seq, err, p)
		}
		if v.Seq != seq || v.TS != now.UnixNano() {
			t.Fatalf("decoded seq %d ts %d, want %d %d", v.Seq, v.TS, seq, now.UnixNano())
		}
		got, err := payloadSeq(p)
		if err != nil || got != seq {
			t.Fatalf("payloadSeq = %d, %v; want %d", got, err, seq)
		}
	}
	if _, err := payloadSeq([]byte(`{"id":1}`)); err == nil {
		t.Fatal("payloadSeq accepted a payload without seq")
	}
}

func TestTrackerCountsLossesAndDuplicates(t *testing.T) {
	tr := newTracker(4)
	for _, s := range []int64{0, 1, 1, 3, 3, 3} {
		tr.deliver(s, 1)
	}
	tr.deliver(9, 1) // out of range: bad, neither loss nor dup
	if got := tr.losses(); got != 1 {
		t.Errorf("losses = %d, want 1 (seq 2 never delivered)", got)
	}
	if got := tr.dups(); got != 3 {
		t.Errorf("dups = %d, want 3 (seq 1 once more, seq 3 twice more)", got)
	}
	if tr.wait(10 * time.Millisecond) {
		t.Error("wait returned true with seq 2 missing")
	}
	tr.deliver(2, 1)
	if !tr.wait(time.Second) || tr.losses() != 0 {
		t.Errorf("after seq 2: wait false or losses %d", tr.losses())
	}
}

func TestPercentileNearestRank(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[99-i] = float64(i + 1) // 100..1, unsorted
	}
	for _, c := range []struct{ p, want float64 }{{50, 50}, {95, 95}, {99, 99}, {100, 100}} {
		if got := pct(append([]float64(nil), xs...), c.p); got != c.want {
			t.Errorf("p%.0f = %v, want %v", c.p, got, c.want)
		}
	}
}

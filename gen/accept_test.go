package gen

import (
	"strings"
	"testing"
)

func edit(t *testing.T, src string, edits ...string) string {
	t.Helper()
	for i := 0; i+1 < len(edits); i += 2 {
		if strings.Count(src, edits[i]) != 1 {
			t.Fatalf("edit %q does not match exactly once", edits[i])
		}
		src = strings.Replace(src, edits[i], edits[i+1], 1)
	}
	return src
}

// Each change has an id made of wire names and the kind of change, in file order.
func TestBreakingChangeIDs(t *testing.T) {
	src := edit(t, breakingBase,
		"[KRW, USD, EUR]", "[KRW, USD]",
		"[open, shipped]", "[open]",
		"      qty: int32\n", "",
		"note: {type: string, optional: true}", "note: string",
		`tags: "[]string"`, `tags: "[]bool"`,
		"[web, app]", "[web]",
		"      channel:", "      gift: bool\n      channel:",
		"[order_id]\n", "[order_id, note]\n    ordering_key: order_id\n",
		"  order_shipped:\n    fields: {order_id: string, ref: {go: encoding/json.Number}}\n", "",
		"delivery: direct", "delivery: outbox",
	)
	rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rep.All {
		got = append(got, c.ID)
	}
	want := []string{
		`type money field currency enum value "EUR" removed`,
		`type status enum value "shipped" removed`,
		"event order_shipped removed",
		"event order_placed field qty removed",
		"event order_placed field tags type changed",
		"event order_placed field note made required",
		"event order_placed field gift added as required",
		`event order_placed field channel enum value "app" removed`,
		"event order_placed idempotency_key changed",
		"event order_placed ordering_key added",
		"event ping delivery changed to outbox",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ids:\n%s\nwant:\n%s\nchanges:\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), rep.Changes)
	}
	if len(rep.Changes) != len(want) || !rep.Failed() {
		t.Errorf("nothing accepted: %d changes fail, Failed %v; want %d and true", len(rep.Changes), rep.Failed(), len(want))
	}
}

const noteRemoved = "      note: {type: string, optional: true}\n"

// acceptExample is docs/catalog-contract.md's example, tested here.
const acceptExample = `
accept_breaking:
  - change: event order_placed field note removed
    reason: nothing reads note since March; none pending (outboxgen status)
`

// An accept_breaking entry added by the new version accepts its change, and only that one;
// one that matches nothing fails at its place; one the old version holds too is ignored.
func TestBreakingAccept(t *testing.T) {
	accept := func(entries ...string) string {
		return "accept_breaking:\n" + strings.Join(entries, "")
	}
	const noteEntry = "  - change: event order_placed field note removed\n    reason: nothing reads it; none pending\n"
	t.Run("accepted", func(t *testing.T) {
		src := edit(t, breakingBase, noteRemoved, "", "[open, shipped]", "[open]") + strings.TrimPrefix(acceptExample, "\n")
		rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.All) != 2 || rep.All[1].Accepted == nil || rep.All[0].Accepted != nil {
			t.Fatalf("All = %+v; want the enum change failing, the removal accepted", rep.All)
		}
		a := rep.All[1].Accepted
		if a.ID != "event order_placed field note removed" || a.Reason != "nothing reads note since March; none pending (outboxgen status)" || a.Line != 27 || a.Col != 13 {
			t.Errorf("acceptance = %+v; want the entry's id, reason and the position of its change (27:13)", a)
		}
		if got := rep.Changes.Error(); !rep.Failed() || !strings.HasPrefix(got, `events.yaml:8:3: type "status": enum value "shipped" removed`) || len(rep.Changes) != 1 {
			t.Errorf("failing: %s; want only the unaccepted enum change", got)
		}
		src = edit(t, src, "[open]", "[open, shipped]")
		rep, err = Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase))
		if err != nil || rep.Failed() || len(rep.All) != 1 {
			t.Errorf("every change accepted: %v, %+v; want it to pass", err, rep)
		}
	})
	t.Run("stale", func(t *testing.T) {
		src := edit(t, breakingBase, noteRemoved, "") + accept(noteEntry, "  - change: event order_placed field notes removed\n    reason: typo\n", "  - {change: event order_placed field qty removed, reason: not made}\n")
		rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase))
		if err != nil {
			t.Fatal(err)
		}
		want := `events.yaml:29:13: accept_breaking: change "event order_placed field notes removed" matches no breaking change against old.yaml (did you mean "event order_placed field note removed"?): remove it, or correct the id` + "\n" +
			`events.yaml:31:14: accept_breaking: change "event order_placed field qty removed" matches no breaking change against old.yaml: remove it, or correct the id`
		if got := rep.Stale.Error(); got != want || !rep.Failed() || len(rep.Changes) != 0 {
			t.Errorf("stale:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("carried from the old version", func(t *testing.T) {
		// Merged, the entry is in the version compared against: it is ignored, not stale.
		old := edit(t, breakingBase, noteRemoved, "") + accept(noteEntry)
		rep, err := Breaking("events.yaml", []byte(old), "origin/main:events.yaml", []byte(old))
		if err != nil || rep.Failed() {
			t.Fatalf("an entry carried over: %v %+v; want it ignored", err, rep)
		}
		// And it accepts nothing new: the same id made again needs a new reason.
		again := edit(t, old, "      tags:", "      note: {type: string, optional: true}\n      tags:")
		src := edit(t, again, noteRemoved, "")
		rep, err = Breaking("events.yaml", []byte(src), "origin/main:events.yaml", []byte(again))
		if err != nil || len(rep.Changes) != 1 {
			t.Fatalf("the change made again under a carried entry: %v %+v; want it to fail", err, rep)
		}
		src = edit(t, src, "reason: nothing reads it; none pending", "reason: gone again")
		if rep, err = Breaking("events.yaml", []byte(src), "origin/main:events.yaml", []byte(again)); err != nil || rep.Failed() {
			t.Errorf("the change made again with a new reason: %v %+v; want it accepted", err, rep)
		}
	})
	t.Run("flags", func(t *testing.T) {
		src := edit(t, breakingBase, noteRemoved, "")
		rep, err := Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase), "event order_placed field note removed")
		if err != nil || rep.Failed() || rep.All[0].Accepted == nil || rep.All[0].Accepted.Line != 0 {
			t.Fatalf("--accept: %v %+v; want the change accepted by the flag", err, rep)
		}
		rep, err = Breaking("events.yaml", []byte(src), "old.yaml", []byte(breakingBase), "event order_placed field note removed", "event ping removed")
		if err != nil || !rep.Failed() || len(rep.StaleFlags) != 1 || !strings.HasPrefix(rep.StaleFlags[0], `--accept "event ping removed" matches no breaking change`) {
			t.Errorf("a stale --accept: %v %q; want it to fail", err, rep.StaleFlags)
		}
	})
}

// accept_breaking is part of the catalog language: checked by check, ignored by generate.
func TestAcceptBreakingIsNotGenerated(t *testing.T) {
	with := breakingBase + "accept_breaking:\n  - change: event order_placed field note removed\n    reason: reviewed\n"
	a, err := Generate("events.yaml", []byte(breakingBase))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate("events.yaml", []byte(with))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) || string(a["outbox_gen.go"]) != string(b["outbox_gen.go"]) {
		t.Errorf("accept_breaking changed the generated code")
	}
}

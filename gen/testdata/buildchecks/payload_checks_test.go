// TestGeneratedCodeBuilds copies this file into the temp module's package generated from
// testdata/golden/ok_payload_checks.txt and runs it with go test: it calls the generated,
// unexported decodeOrderPlaced, which only code in that package can reach.

package checks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// good is a payload that EnqueueOrderPlaced writes: every field present.
func good(t *testing.T) map[string]any {
	t.Helper()
	note := "leave at the door"
	e := OrderPlaced{
		OrderID: "o-1", Ref: "12",
		Lines:    []Line{{Sku: "a", Qty: 1, Tags: []string{"x"}, Status: LineStatusOpen}, {Sku: "b", Qty: 2, Status: LineStatusShipped}},
		ShipTo:   Address{Street: "Main St", Note: &note},
		BySku:    map[string]Line{"a": {Sku: "a", Status: LineStatusOpen}},
		Grid:     [][]Line{{{Sku: "g", Status: LineStatusOpen}}, nil},
		Levels:   []Level{LevelLow},
		Priority: OrderPlacedPriorityRush, Raw: []byte("hi"), Doc: json.RawMessage(`{"k":1}`),
		LevelSets: map[string][]Level{"x": {LevelHigh}},
		PlacedAt:  time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func encode(t *testing.T, m map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeAcceptsWhatEnqueueWrites(t *testing.T) {
	if _, err := decodeOrderPlaced(encode(t, good(t))); err != nil {
		t.Fatalf("a payload EnqueueOrderPlaced writes was refused: %v", err)
	}
	// Nil lists, maps, bytes and json are written as null; nil optional fields too.
	var zero OrderPlaced
	zero.OrderID, zero.Ref, zero.Priority, zero.ShipTo.Street = "o", "1", OrderPlacedPriorityNormal, "s"
	b, err := json.Marshal(zero)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeOrderPlaced(b); err != nil {
		t.Fatalf("a payload with nil lists, maps, bytes, json and optional fields (%s) was refused: %v", b, err)
	}
	// Optional fields may be absent; unknown fields are ignored; whitespace does not matter.
	m := good(t)
	delete(m, "bill_to")
	delete(m, "note")
	delete(m, "maybe_levels")
	m["added_later"] = []any{1, map[string]any{"x": nil}}
	spaced := strings.ReplaceAll(string(encode(t, m)), `":`, `" :  `)
	if _, err := decodeOrderPlaced(json.RawMessage(spaced)); err != nil {
		t.Fatalf("absent optional fields or an unknown field were refused: %v", err)
	}
}

func TestDecodeRefusesDrift(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"missing", func(m map[string]any) { delete(m, "order_id") }, `field "order_id" is missing`},
		{"missing list", func(m map[string]any) { delete(m, "lines") }, `field "lines" is missing`},
		{"null scalar", func(m map[string]any) { m["placed_at"] = nil }, `field "placed_at" is null`},
		{"null struct", func(m map[string]any) { m["ship_to"] = nil }, `field "ship_to" is null`},
		{"null enum", func(m map[string]any) { m["priority"] = nil }, `field "priority" is null`},
		{"enum", func(m map[string]any) { m["priority"] = "XXX" }, `field "priority": "XXX" is not one of normal, rush`},
		{"nested missing", func(m map[string]any) { delete(m["ship_to"].(map[string]any), "street") }, `field "ship_to.street" is missing`},
		{"optional struct present", func(m map[string]any) { m["bill_to"] = map[string]any{} }, `field "bill_to.street" is missing`},
		{"list element", func(m map[string]any) { m["lines"].([]any)[1].(map[string]any)["status"] = "lost" }, `field "lines[1].status": "lost" is not one of open, shipped`},
		{"null list element", func(m map[string]any) { m["lines"].([]any)[0] = nil }, `field "lines[0]" is null`},
		{"map element", func(m map[string]any) { delete(m["by_sku"].(map[string]any)["a"].(map[string]any), "qty") }, `field "by_sku[a].qty" is missing`},
		{"nested list", func(m map[string]any) { m["grid"].([]any)[0].([]any)[0].(map[string]any)["sku"] = nil }, `field "grid[0][0].sku" is null`},
		{"enum list", func(m map[string]any) { m["levels"] = []any{"low", "mid"} }, `field "levels[1]": "mid" is not one of low, high`},
		{"null in enum list", func(m map[string]any) { m["levels"] = []any{nil} }, `field "levels[0]" is null`},
		{"optional enum list", func(m map[string]any) { m["maybe_levels"] = []any{"top"} }, `field "maybe_levels[0]": "top" is not one of low, high`},
		{"map of enum lists", func(m map[string]any) { m["level_sets"] = map[string]any{"x": []any{"low", "nope"}} }, `field "level_sets[x][1]": "nope" is not one of low, high`},
		{"several", func(m map[string]any) { delete(m, "order_id"); m["priority"] = "XXX" }, `field "order_id" is missing; field "priority": "XXX" is not one of normal, rush`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := good(t)
			tc.change(m)
			_, err := decodeOrderPlaced(encode(t, m))
			if err == nil || err.Error() != "payload: "+tc.want {
				t.Fatalf("decodeOrderPlaced: %v; want %q", err, tc.want)
			}
		})
	}
	if _, err := decodeOrderPlaced(json.RawMessage(" null ")); err == nil || err.Error() != "payload: the payload is null" {
		t.Fatalf("a null payload: %v", err)
	}
	if _, err := decodeNothingInside(json.RawMessage(`{"whatever":1}`)); err != nil {
		t.Fatalf("an event without fields refused an object: %v", err)
	}
}

func TestValidateRefusesInvalidUTF8(t *testing.T) {
	bad := "a\xffb"
	e := OrderPlaced{
		OrderID: bad, Ref: "1\xfe",
		Lines:       []Line{{Sku: "ok", Status: LineStatusOpen, Tags: []string{"ok", bad}}},
		ShipTo:      Address{Street: "s", Note: &bad},
		BySku:       map[string]Line{bad: {Sku: "s", Status: LineStatusOpen}},
		Labels:      map[string]string{"k": bad},
		MaybeLabels: &map[string]string{bad: "v"},
		MaybeTags:   &[]string{bad},
		Note:        &bad,
		Priority:    OrderPlacedPriorityRush,
	}
	err := e.Validate()
	if err == nil {
		t.Fatal("Validate accepted invalid UTF-8")
	}
	for _, want := range []string{
		"order_placed: ref is not valid UTF-8",
		"order_placed: order_id is not valid UTF-8",
		"order_placed: lines[0]: tags[1] is not valid UTF-8",
		"order_placed: ship_to: note is not valid UTF-8",
		`order_placed: by_sku: key "a\xffb" is not valid UTF-8`,
		`order_placed: labels["k"] is not valid UTF-8`,
		`order_placed: maybe_labels: key "a\xffb" is not valid UTF-8`,
		"order_placed: maybe_tags[0] is not valid UTF-8",
		"order_placed: note is not valid UTF-8",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nlacks %q", err, want)
		}
	}
	ok := OrderPlaced{OrderID: "é", Ref: "1", ShipTo: Address{Street: "日本"}, Priority: OrderPlacedPriorityNormal}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate refused valid UTF-8: %v", err)
	}
}

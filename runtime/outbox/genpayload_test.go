package outbox_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// checkOrder runs the checks a generated decoder runs on an order payload: required fields,
// a nullable list, an optional field, an enum inside a nested object, and a map and a list of
// objects.
func checkOrder(payload string) error {
	c := &outbox.PayloadCheck{}
	if o, ok := c.Object("", json.RawMessage(payload)); ok {
		o.Required("id")
		if v := o.Required("total"); v != nil {
			if t, ok := c.Object(o.Path("total"), v); ok {
				if v := t.Required("currency"); v != nil {
					c.Enum(t.Path("currency"), v, "KRW", "USD", "EUR")
				}
			}
		}
		o.Nullable("tags")
		o.Optional("note")
		if v := o.Nullable("lines"); v != nil {
			for _, x := range outbox.PayloadList(o.Path("lines"), v) {
				if l, ok := c.Object(x.Path, x.Raw); ok {
					l.Required("sku")
				}
			}
		}
		if v := o.Nullable("by_region"); v != nil {
			for _, x := range outbox.PayloadMap(o.Path("by_region"), v) {
				c.Enum(x.Path, x.Raw, "eu", "us")
			}
		}
	}
	return c.Err()
}

// TestPayloadCheckMessages pins the text of each problem: it becomes last_error of a FAILED
// row, which operators read and search for.
func TestPayloadCheckMessages(t *testing.T) {
	cases := []struct{ payload, want string }{
		{`{"id":1,"total":{"currency":"KRW"},"tags":null,"lines":[{"sku":"a"}],"by_region":{"x":"eu"}}`, ""},
		{`{"id":1,"total":{"currency":"KRW"},"tags":["t"],"note":null,"lines":null,"by_region":null}`, ""},
		{`null`, `payload: the payload is null`},
		{`[1]`, `payload: the payload is not a JSON object`},
		{`{}`, `payload: field "id" is missing; field "total" is missing; field "tags" is missing; field "lines" is missing; field "by_region" is missing`},
		{`{"id":null,"total":null,"tags":null,"lines":null,"by_region":null}`, `payload: field "id" is null; field "total" is null`},
		{`{"id":1,"total":{"currency":"XYZ"},"tags":null,"lines":null,"by_region":null}`, `payload: field "total.currency": "XYZ" is not one of KRW, USD, EUR`},
		{`{"id":1,"total":{"currency":7},"tags":null,"lines":null,"by_region":null}`, `payload: field "total.currency" is not a string`},
		{`{"id":1,"total":{"currency":null},"tags":null,"lines":null,"by_region":null}`, `payload: field "total.currency" is null`},
		{`{"id":1,"total":{},"tags":null,"lines":null,"by_region":null}`, `payload: field "total.currency" is missing`},
		{`{"id":1,"total":"x","tags":null,"lines":null,"by_region":null}`, `payload: field "total" is not a JSON object`},
		{`{"id":1,"total":{"currency":"USD"},"tags":null,"lines":[{"sku":"a"},{},null],"by_region":{"b":"mars","a":"us","c":null}}`,
			`payload: field "lines[1].sku" is missing; field "lines[2]" is null; field "by_region[b]": "mars" is not one of eu, us; field "by_region[c]" is null`},
	}
	for _, c := range cases {
		err := checkOrder(c.payload)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("checks of %s:\n got  %q\n want %q", c.payload, got, c.want)
		}
	}
}

func TestPayloadItems(t *testing.T) {
	list := outbox.PayloadList("xs", json.RawMessage(`[1,"a",null]`))
	want := []outbox.PayloadItem{{"xs[0]", json.RawMessage(`1`)}, {"xs[1]", json.RawMessage(`"a"`)}, {"xs[2]", json.RawMessage(`null`)}}
	if !reflect.DeepEqual(list, want) {
		t.Errorf("PayloadList = %q, want %q", list, want)
	}
	m := outbox.PayloadMap("m", json.RawMessage(`{"b":2,"a":1}`))
	wantMap := []outbox.PayloadItem{{"m[a]", json.RawMessage(`1`)}, {"m[b]", json.RawMessage(`2`)}}
	if !reflect.DeepEqual(m, wantMap) {
		t.Errorf("PayloadMap = %q, want %q, in key order", m, wantMap)
	}
	for _, raw := range []string{`null`, `"not a list"`} {
		if got := outbox.PayloadList("xs", json.RawMessage(raw)); len(got) != 0 {
			t.Errorf("PayloadList of %s = %q, want none", raw, got)
		}
		if got := outbox.PayloadMap("m", json.RawMessage(raw)); len(got) != 0 {
			t.Errorf("PayloadMap of %s = %q, want none", raw, got)
		}
	}
}

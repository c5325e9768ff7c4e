package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// span is what this test reads of the stdout exporter's JSON.
type span struct {
	Name        string
	SpanKind    int
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
	Status struct{ Code string }
}

func (s span) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// The example on a real database: the request's span, then two attempts of the mail, each a
// consumer span linked to the request's span.
func TestExample(t *testing.T) {
	db := testdb.New(t)
	var out, spansOut bytes.Buffer
	if err := run(context.Background(), db.DB, &out, &spansOut); err != nil {
		t.Fatal(err)
	}
	var spans []span
	dec := json.NewDecoder(&spansOut)
	for {
		var s span
		err := dec.Decode(&s)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode the exporter's output: %v", err)
		}
		spans = append(spans, s)
	}
	if len(spans) != 3 || spans[0].Name != "POST /signup" || spans[1].Name != "process welcome_email" || spans[2].Name != "process welcome_email" {
		t.Fatalf("spans = %+v, want the request's and two attempts", spans)
	}
	req := spans[0].SpanContext
	for i, s := range spans[1:] {
		if s.SpanKind != 5 { // trace.SpanKindConsumer
			t.Errorf("attempt %d: kind %d, want consumer (5)", i+1, s.SpanKind)
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext != req || s.SpanContext.TraceID == req.TraceID {
			t.Errorf("attempt %d: trace %s links %+v, want a new trace linked to the request span %+v", i+1, s.SpanContext.TraceID, s.Links, req)
		}
		if got := s.attr("outboxgen.attempt"); got != float64(i+1) {
			t.Errorf("attempt %d: outboxgen.attempt = %v", i+1, got)
		}
		if got, want := s.attr("outboxgen.outcome"), []string{"retried", "sent"}[i]; got != want {
			t.Errorf("attempt %d: outboxgen.outcome = %v, want %s", i+1, got, want)
		}
	}
	if spans[1].Status.Code != "Error" {
		t.Errorf("first attempt status = %q, want Error", spans[1].Status.Code)
	}
	for _, want := range []string{"POST /signup: trace " + req.TraceID, "attempt 1 of message", "attempt 2 of message", "-" + req.SpanID + "-01", "welcome mail sent"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

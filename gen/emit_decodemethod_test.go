package gen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestDecodeMethodOnEveryOutboxEvent: every outbox event's payload type has the exported
// DecodeOutboxPayload on its pointer, which the test kit finds by interface; a direct event
// (never stored) has none, and the file never imports testing.
func TestDecodeMethodOnEveryOutboxEvent(t *testing.T) {
	files, err := GenerateFile(filepath.Join("..", "events.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for path, code := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, code, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "testing" {
				t.Errorf("%s imports testing", path)
			}
		}
		decoders := map[string]bool{}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "DecodeOutboxPayload" {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				t.Errorf("%s: DecodeOutboxPayload has a value receiver, want a pointer", path)
				continue
			}
			decoders[star.X.(*ast.Ident).Name] = true
		}
		for _, want := range []string{"WelcomeEmail", "PaymentFailed", "OrderPlaced", "OrderPaid", "OrderShipped"} {
			if !decoders[want] {
				t.Errorf("%s: *%s has no DecodeOutboxPayload", path, want)
			}
		}
		if decoders["OpsDBWriteFailed"] || len(decoders) != 5 {
			t.Errorf("%s: DecodeOutboxPayload on %v, want exactly the 5 outbox events (not the direct one)", path, decoders)
		}
	}
}

package gen_test

import (
	"fmt"
	"strings"

	"github.com/outboxgen/outboxgen/gen"
)

// Generate returns every problem of a catalog at once, in the go build shape, naming the
// catalog as it was given.
func ExampleGenerate_errors() {
	catalog := `version: 1
package: events
events:
  payment_failed:
    fields:
      amount: mony
      invoice_id: strng
    idempotency_key: [invoice]
types:
  money: {fields: {amount: int64}}
`
	_, err := gen.Generate("events.yaml", []byte(catalog))
	fmt.Println(err)
	// Output:
	// events.yaml:6:15: event "payment_failed": field "amount": unknown type "mony" (did you mean "money"?)
	// events.yaml:7:19: event "payment_failed": field "invoice_id": unknown type "strng" (did you mean "string"?)
	// events.yaml:8:23: event "payment_failed": idempotency_key "invoice": no such field (did you mean "invoice_id"?)
}

// Generate returns the file to write, keyed by its path next to the catalog.
func ExampleGenerate() {
	files, err := gen.Generate("svc/events.yaml", []byte(`version: 1
package: events
events:
  welcome_email:
    fields: {company_id: int64}
    idempotency_key: [company_id]
`))
	if err != nil {
		panic(err)
	}
	for path, code := range files {
		fmt.Println(path)
		fmt.Println(strings.Contains(string(code), "func EnqueueWelcomeEmail(ctx context.Context, tx outbox.DBTX, e WelcomeEmail, opts ...outbox.EnqueueOption) (outbox.MessageID, error)"))
	}
	// Output:
	// svc/outbox_gen.go
	// true
}

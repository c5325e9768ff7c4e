// Package schema is the ent schema of the tests' one business table.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
)

// Order is the business change an event is enqueued beside.
type Order struct {
	ent.Schema
}

// Fields of the Order.
func (Order) Fields() []ent.Field {
	return []ent.Field{
		field.String("item"),
	}
}

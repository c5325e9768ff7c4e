package gen

// deleteWhenSent checks an event's delete_when_sent: true or false, on an outbox event. A
// direct event has no row to delete.
func (v *validator) deleteWhenSent(e *eventDecl, what string, direct bool) {
	d := e.deleteWhenSent
	if d == nil {
		return
	}
	switch {
	case d.v != "true" && d.v != "false":
		v.ps.add(d.p, "%s: delete_when_sent must be true or false, found %q", what, d.v)
	case direct:
		v.ps.add(d.p, "%s: delete_when_sent applies to outbox delivery; a direct event has no row to delete", what)
	}
}

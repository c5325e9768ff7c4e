package outbox

// Worker is defined in full below; this placeholder keeps step 1 compiling.
type Worker struct {
	wake chan struct{}
}

// Wake makes a waiting worker claim at once instead of at its next poll. It never blocks.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

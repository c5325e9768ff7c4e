package outboxconsole

import "github.com/outboxgen/outboxgen/runtime/outbox"

// brokenRow is one broken ordering key on the overview (outbox.BrokenKey).
type brokenRow struct {
	Key    string
	Seq    int64
	ID     int64
	Exists bool // the message can be opened (its entry may name one that is gone)
	Type   string
	Status string
	Reason string
}

// brokenRows shows a snapshot's broken keys, keys and types through clean.
func brokenRows(list []outbox.BrokenKey, clean func(string) string) []brokenRow {
	rows := make([]brokenRow, 0, len(list))
	for _, b := range list {
		rows = append(rows, brokenRow{Key: clean(b.OrderingKey), Seq: b.Seq, ID: int64(b.Message), Exists: b.Reason != outbox.BrokenHeadMissing,
			Type: clean(b.EventType), Status: string(b.Status), Reason: string(b.Reason)})
	}
	return rows
}

package outboxotel

import (
	"maps"
	"sync"
	"sync/atomic"
)

// maxCachedTypes bounds a byType cache: a worker handles the few event types of its router, but
// nothing stops a caller from handing Observer.Handled arbitrary strings.
const maxCachedTypes = 1024

// byType holds what a handler call of one event type needs (a span name, attribute sets),
// built once per event type: a lookup is an atomic load and a map read, without a lock, a
// boxed key or an allocation. Event types are few and settle at startup, so adding one copies
// the map. Past maxCachedTypes, build runs at each call instead.
type byType[V any] struct {
	build func(eventType string) V
	m     atomic.Pointer[map[string]V]
	mu    sync.Mutex // serializes the copies
}

func (c *byType[V]) get(eventType string) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[eventType]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var next map[string]V
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[eventType]; ok {
			return v
		}
		if len(*m) >= maxCachedTypes {
			return c.build(eventType)
		}
		next = maps.Clone(*m)
	} else {
		next = map[string]V{}
	}
	v := c.build(eventType)
	next[eventType] = v
	c.m.Store(&next)
	return v
}

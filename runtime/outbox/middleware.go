// Middleware wraps every handler call of a Worker. An integration such as runtime/outboxotel
// can thus trace handlers without the core importing a tracing library.

package outbox

import (
	"errors"
	"fmt"
)

// Middleware wraps every handler call of a Worker, as Config.Middleware. It serves tracing,
// metrics or a tenant's context. It sees the payload, the Delivery with its headers, and the
// handler's error. It must return the error it was given, or one that wraps it, unless it
// means to change the outcome.
type Middleware func(next HandlerFunc) HandlerFunc

// wrapHandlers applies mws to the handler of every route once, the first entry outermost. A
// Worker's router is its own snapshot, so wrapping once serves every call. Wrapping at each
// call would cost every message an allocation per middleware. A panic while wrapping is an
// error here, since it happens outside callHandler's recover.
func (r *Router) wrapHandlers(mws []Middleware) (err error) {
	for t, rt := range r.routes {
		for i := len(mws) - 1; i >= 0; i-- {
			if rt.handler, err = wrapOne(mws[i], rt.handler); err != nil {
				return fmt.Errorf("event %q: Config.Middleware[%d] failed wrapping its handler: %w", t, i, err)
			}
		}
		r.routes[t] = rt
	}
	return nil
}

func wrapOne(mw Middleware, h HandlerFunc) (wrapped HandlerFunc, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if mw == nil {
		return nil, errors.New("nil middleware")
	}
	if wrapped = mw(h); wrapped == nil {
		return nil, errors.New("it returned a nil handler")
	}
	return wrapped, nil
}

// Package outboxotel connects outboxgen to OpenTelemetry. The enqueuing request's trace context
// travels with each message. Every handler call is a span. The worker's counts and durations
// and the table's depth are OTel metrics.
//
// It is its own Go module, so applications that use runtime/outbox without OpenTelemetry never
// inherit it. Wiring is one line on each side.
//
//	outboxotel.InstallEnqueue()                          // at startup, process-wide
//	cfg, err := outboxotel.Instrument(outbox.Config{})   // the worker: spans and metrics
//	w, err := outbox.NewWorker(db, router, cfg)
//
// The table's depth, lag and stuck rows become gauges with one more line, at one query per
// collection.
//
//	reg, err := outboxotel.RegisterStats(db)
//
// Providers and the propagator default to OpenTelemetry's globals, such as
// otel.GetTracerProvider. That holds whether the application sets them before or after wiring
// outboxgen. Options override them. The global propagator does nothing until the application
// sets one, as every OpenTelemetry setup does.
//
//	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
//		propagation.TraceContext{}, propagation.Baggage{}))
//
// # Enqueue: headers, never a failed enqueue
//
// InstallEnqueue registers an outbox.EnqueueHook. It writes what the propagator injects from
// the enqueuing context into the message's headers. The W3C propagators inject traceparent,
// tracestate and baggage. An untraced context adds nothing, baggage aside. Tracing must never
// fail a business transaction, so the hook stores only what outbox.Enqueue accepts.
//   - A header whose key or value the core would refuse is dropped with a warning on the
//     logger. The logger gets at most one line a minute, with the number suppressed.
//   - An oversized baggage or tracestate loses list members until it fits, as the W3C
//     specifications allow. Baggage loses its largest members first. Tracestate loses members
//     over 128 bytes, then members from the end.
//   - All trace headers together stay within 8 KiB, half the core's limit.
//   - A propagator that panics costs the message its trace headers, not its enqueue.
//
// By default the hook also adds an event "outboxgen.enqueue", with the event type, to the
// enqueuing span. A person reading the request's trace thus sees where the message was
// created. The event records that the trace context was captured, not that the transaction
// committed. WithEnqueueSpan creates a PRODUCER span "create <event type>" per message
// instead. The handler's spans then link to it rather than to the request's span.
//
// # Handler spans: linked, not children
//
// Middleware runs each handler call in a span of kind CONSUMER named "process <event type>".
// By default the span starts a new trace and carries a link to the enqueuing span. The
// OpenTelemetry messaging conventions recommend that for asynchronous delivery. A message may
// be handled seconds or days after its request ended, and retried many times. As children,
// those attempts would stretch the request's trace over days and make its duration
// meaningless. A trace viewer follows the link from the handler's span to the request and
// back. AsChild makes each handler span a child of the enqueuing span instead. That gives one
// trace per request, which helps when delivery is prompt and the backend shows links poorly.
// A message enqueued without a trace context, or with one that does not parse, gets a root
// span without a link. Baggage from the headers is put in the handler's context either way.
//
// Each delivery, retries included, is its own span, with the attributes below. The first four
// are set at its start, so a head sampler can decide by event type. The others are set with
// the outcome when the handler returns.
//
//	messaging.system            "outboxgen"
//	messaging.operation.type    "process"
//	messaging.operation.name    "process"
//	messaging.destination.name  the event type
//	messaging.message.id        the message id
//	messaging.message.body.size the payload's size in bytes
//	outboxgen.attempt           Delivery.Attempt (1 on the first delivery)
//	outboxgen.outcome           sent, retried or failed
//
// A handler error is recorded on the span as an exception event, with status Error and
// error.type. outboxgen.max_attempts, set to Delivery.MaxAttempts beside the attempt, says how
// many are left. outboxgen.outcome is "sent" for nil. It is "failed" for an outbox.Permanent
// error or the last attempt. It is "retried" otherwise. That includes a handler the worker's
// shutdown cancelled, since the worker gives the message back. A panic is recorded and
// re-raised, for the worker to recover as usual.
//
// # Metrics
//
// Observer, an outbox.Observer over an OTel Meter, and RegisterStats report what
// runtime/outboxprom reports. They are named by the OpenTelemetry conventions where one
// applies. The Prometheus name follows in parentheses.
//
//	messaging.client.consumed.messages   counter, rows claimed (outbox_claimed_total): operation.name
//	                                     "claim", or "handoff" for those InTx handed off
//	                                     (outbox_handed_off_total)
//	messaging.client.operation.duration  histogram, s, one claim transaction (outbox_claim_duration_seconds)
//	messaging.process.duration           histogram, s, handler calls by event type and outcome
//	                                     (outbox_handler_duration_seconds)
//	outboxgen.handled.messages           counter, handler calls by event type and outcome
//	                                     (outbox_sent_total, outbox_retried_total, outbox_failed_total)
//	outboxgen.reclaimed.messages         counter, rows moved back by reclaim passes (outbox_reclaimed_total)
//	outboxgen.stuck_seen.messages        counter, stuck rows seen, summed over watch passes
//	                                     (outbox_stuck_seen_total)
//
// RegisterStats reports these from outbox.Stats at each collection. They are the same for
// every instance.
//
//	outboxgen.messages                   gauge, rows by event type and outboxgen.status (outbox_messages)
//	outboxgen.due.messages               gauge, PENDING rows already due (outbox_due_messages)
//	outboxgen.oldest_pending.age         gauge, s (outbox_oldest_pending_age_seconds)
//	outboxgen.oldest_due.age             gauge, s (outbox_oldest_due_age_seconds)
//	outboxgen.stale.messages             gauge (outbox_stale_messages)
//	outboxgen.stuck.messages             gauge (outbox_stuck_messages)
//	outboxgen.held_ordering_keys         gauge, held ordering keys by their head's event type; the
//	                                     sum is outbox_held_ordering_keys
//	outboxgen.oldest_held.age            gauge, s (outbox_oldest_held_age_seconds)
//	outboxgen.held_ordering_key.head_id  gauge, the id of the message holding each held key, with
//	                                     outboxgen.ordering_key, outboxgen.status (the head's) and
//	                                     its event type, for at most outbox.MaxHeldListed keys
//	                                     (outbox_held_ordering_key_head_id)
//	outboxgen.broken_ordering_keys       gauge, ordering keys stalled by a row the runtime never
//	                                     leaves; a running worker repairs them
//	                                     (outbox_broken_ordering_keys)
//	outboxgen.retention.oldest_sent.age  gauge, s, how long ago the oldest SENT row still kept was
//	                                     sent (outbox_retention_oldest_sent_seconds)
//
// The event type is messaging.destination.name on every instrument that has one.
package outboxotel

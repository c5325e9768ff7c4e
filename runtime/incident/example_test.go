package incident_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/outboxgen/outboxgen/runtime/incident"
)

// The default reporter writes one error-level line per incident. Here the time attribute is
// dropped so the output is stable.
func ExampleSlog() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	r := incident.Slog(logger)

	r.Report(context.Background(), incident.Incident{
		Kind:    incident.LockLost,
		Subject: "billing:monthly",
		ConnID:  42,
		Err:     errors.New("RELEASE_LOCK returned 0: held by another session"),
	})
	// Output:
	// level=ERROR msg="outboxgen incident" kind=lock_lost subject=billing:monthly conn_id=42 error="RELEASE_LOCK returned 0: held by another session"
}

// Func adapts a function, for a pager or an error tracker. The report still arrives when the
// caller's context is already cancelled: cleanup paths report after the work was cancelled.
func ExampleFunc() {
	pager := incident.Func(func(ctx context.Context, in incident.Incident) {
		fmt.Printf("page on-call: %s on %q: %v\n", in.Kind, in.Subject, in.Err)
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pager.Report(ctx, incident.Incident{
		Kind:    incident.Stuck,
		Subject: "outbox_messages",
		Err:     errors.New("3 rows PROCESSING past 3x their lease"),
	})
	// Output:
	// page on-call: stuck on "outbox_messages": 3 rows PROCESSING past 3x their lease
}

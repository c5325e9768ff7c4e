package outboxconsole

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// A paused event type shows as a banner with its reason, escaped, and cancelled messages as a
// count.
func TestOverviewShowsPausesAndCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if err := outbox.Pause(ctx, b.db, "welcome_email", outbox.PauseOptions{For: time.Hour, Reason: `provider down <script>x</script>`}); err != nil {
		t.Fatal(err)
	}
	id := b.insert("welcome_email", "PENDING", `{}`, 0, nil, nil, nil, nil, nil, nil, "")
	if _, err := outbox.Cancel(ctx, b.db, outbox.Filter{IDs: []outbox.MessageID{id}}); err != nil {
		t.Fatal(err)
	}
	r := b.get("/")
	b.mustContain(r, "<strong>Paused</strong>", "welcome_email", "provider down &lt;script&gt;", `id="total-cancelled">1<`)
	if strings.Contains(r.body, "<script>x") {
		t.Errorf("the reason reached the page unescaped:\n%s", r.body)
	}
}

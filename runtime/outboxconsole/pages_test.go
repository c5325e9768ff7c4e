package outboxconsole

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var listedID = regexp.MustCompile(`<td class="num"><a href="message\?id=(\d+)">`)

func listed(body string) []string {
	var ids []string
	for _, m := range listedID.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestFailedListPagesNewestFirst: 120 FAILED messages of one type and 3 of another; pages of
// 50, newest failure first, the type filter, and links between pages.
func TestFailedListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string // ids[i] failed i seconds ago
	for i := 0; i < 120; i++ {
		ids = append(ids, fmt.Sprint(b.failed("bulk", 1000-i, "x"))) // later ids failed more recently
	}
	for i := 0; i < 3; i++ {
		b.failed("other", 5000, "y")
	}
	newest := make([]string, len(ids))
	for i, id := range ids {
		newest[len(ids)-1-i] = id
	}

	r := b.get("/failed?type=bulk")
	if got := listed(r.body); strings.Join(got, ",") != strings.Join(newest[:50], ",") {
		t.Errorf("page 1 lists %v, want the 50 newest %v", got, newest[:50])
	}
	b.mustContain(r, "120 FAILED message(s) of this type; showing 1–50", "page 1 of 3", `href="failed?page=2&amp;type=bulk"`)
	if strings.Contains(r.body, `rel="prev"`) {
		t.Error("page 1 links to a newer page")
	}
	r = b.get("/failed?type=bulk&page=3")
	if got := listed(r.body); strings.Join(got, ",") != strings.Join(newest[100:], ",") {
		t.Errorf("page 3 lists %v, want the 20 oldest %v", got, newest[100:])
	}
	b.mustContain(r, "showing 101–120", "page 3 of 3", `href="failed?page=2&amp;type=bulk"`)
	if strings.Contains(r.body, `rel="next"`) {
		t.Error("the last page links to an older one")
	}
	all := b.get("/failed")
	b.mustContain(all, "123 FAILED message(s)", "page 1 of 3", `>bulk (120)</option>`, `>other (3)</option>`)
	if other := b.get("/failed?type=other"); len(listed(other.body)) != 3 {
		t.Errorf("type other lists %d messages, want 3", len(listed(other.body)))
	}
	// The filter's options name each type by reference; choosing one lists that type.
	opt := regexp.MustCompile(`<option value="([^"]+)">other \(3\)</option>`).FindStringSubmatch(all.body)
	if opt == nil {
		t.Fatalf("no option for type other:\n%s", all.body)
	}
	if other := b.get("/failed?typeref=" + opt[1]); len(listed(other.body)) != 3 || !strings.Contains(other.body, "3 FAILED message(s) of this type") {
		t.Errorf("the option for type other lists %d messages, want 3:\n%s", len(listed(other.body)), other.body)
	}
}

// TestMessagePage: one message whole, its timeline in order, and a 404 for an unknown id.
func TestMessagePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.failed("payment_failed", 60, "card declined\ngoroutine 7 [running]:\nmain.handle()")
	r := b.get(fmt.Sprintf("/message?id=%d", id))
	b.mustContain(r, `id="status">FAILED<`, "10 of 10", "card declined\ngoroutine 7 [running]:\nmain.handle()",
		`<pre class="payload" id="payload">{&#34;n&#34;:1}</pre>`, "not tried again until someone retries it")
	enq, failed := strings.Index(r.body, "enqueued"), strings.Index(r.body, `<span class="what">failed</span>`)
	if enq < 0 || failed < 0 || enq > failed {
		t.Errorf("the timeline should list enqueued before failed:\n%s", r.body)
	}
	if strings.Contains(r.body, "data-refresh") {
		t.Error("a FAILED message's page refreshes itself; only one on its way should")
	}
	if nf := b.get("/message?id=999999"); nf.status != http.StatusNotFound || !strings.Contains(nf.body, "No message 999999") {
		t.Errorf("unknown id = %d, want 404 saying so", nf.status)
	}
	if bad := b.get("/message?id=abc"); bad.status != http.StatusBadRequest {
		t.Errorf("id=abc = %d, want 400", bad.status)
	}
}

// TestJobsPage: each job's last recorded run, and one job's runs.
func TestJobsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"2026-12-01", "2026-12-02"} {
		b.db.MustExec(t, `INSERT INTO outbox_job_runs (job, period_start, instance, started_at, finished_at)
			VALUES ('nightly_report', ?, 'web-1', TIMESTAMP(?, '00:00:01'), TIMESTAMP(?, '00:00:04'))`, p, p, p)
	}
	r := b.get("/jobs")
	b.mustContain(r, `<a href="jobs?job=nightly_report">nightly_report</a>`, "2026-12-02 00:00:00.000", "web-1", "3s")
	if strings.Contains(r.body, "2026-12-01 00:00:00.000") {
		t.Error("the jobs page lists an older run; it shows each job's last")
	}
	one := b.get("/jobs?job=nightly_report")
	b.mustContain(one, "2026-12-02 00:00:00.000", "2026-12-01 00:00:00.000", "Runs of")
}

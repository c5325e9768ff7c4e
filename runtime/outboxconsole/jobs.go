package outboxconsole

import (
	"net/http"

	"github.com/outboxgen/outboxgen/runtime/mysqllock"
)

// The jobs page: the last runs of the periodic jobs, of every job or one.

type jobRow struct {
	Job, Instance                  string
	Period, Ago, Started, Finished string
	Took                           string
}

type jobsData struct {
	Job  string
	Runs []jobRow
	Err  string
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	d := jobsData{Job: r.URL.Query().Get("job")}
	var runs []mysqllock.JobRun
	var err error
	if d.Job != "" {
		runs, err = mysqllock.Runs(ctx, c.db, d.Job, 100)
	} else {
		runs, err = mysqllock.LastRuns(ctx, c.db, 500)
	}
	status := http.StatusOK
	if err != nil {
		d.Err, status = c.errText(err), http.StatusServiceUnavailable
	}
	now := c.cfg.now()
	for _, run := range runs {
		d.Runs = append(d.Runs, jobRow{
			Job: c.clean(run.Job), Instance: c.clean(run.Instance), Period: stamp(run.PeriodStart), Ago: ago(now, run.PeriodStart),
			Started: stamp(run.StartedAt), Finished: stamp(run.FinishedAt), Took: formatTook(run.FinishedAt.Sub(run.StartedAt)),
		})
	}
	d.Job = c.clean(d.Job)
	c.render(w, r, status, "jobs", d)
}

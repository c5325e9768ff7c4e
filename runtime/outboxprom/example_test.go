package outboxprom_test

import (
	"context"
	"database/sql"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"
)

// Wiring: the Observer counts what this process's worker does, the StatsCollector reads the
// table on each scrape. (Compiled, not run: it needs a database.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	router := outbox.NewRouter() // usually events.NewRouter(handlers), generated

	obs := outboxprom.NewObserver()
	prometheus.MustRegister(obs, outboxprom.NewStatsCollector(db))

	w, err := outbox.NewWorker(db, router, outbox.Config{Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/metrics", promhttp.Handler())
	go func() { log.Print(http.ListenAndServe(":9100", nil)) }()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

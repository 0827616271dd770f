package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the metrics of g in the Prometheus exposition formats, for
// GET /metrics on the admin listener (adminserver.Admin.HandlePublic). A
// collector error leaves the failing metric out rather than failing the
// scrape, and is never written to the response or a log: error text could
// carry what metrics must not.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// NewRegistry returns a registry holding the given collectors, for Handler.
// It panics when two collectors describe the same metric, a programming
// error.
func NewRegistry(collectors ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	return reg
}

package version

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfoName is the name of the gauge BuildInfo returns.
const BuildInfoName = "sluice_build_info"

// BuildInfo returns the gauge sluice_build_info{version,revision,goversion},
// always 1, that names the program's build on its metrics endpoint, so a
// dashboard or an alert can tell which build each router and manager run.
func BuildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfoName,
		Help: "The build of this sluice program: its release version, source revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{
			"version":   Version(),
			"revision":  Revision(),
			"goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}

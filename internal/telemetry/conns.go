package telemetry

import "github.com/prometheus/client_golang/prometheus"

// ConnectionCounts are the front door's connection counts
// (docs/CONFIGURATION.md#11-connection-limits).
type ConnectionCounts struct {
	// Open is the connections open now.
	Open int
	// Unauthenticated is those of them that have not carried an
	// authenticated request yet.
	Unauthenticated int
	// ClosedOverLimit counts the new connections closed at once because
	// every slot was held by an authenticated connection.
	ClosedOverLimit uint64
	// ClosedEvicted counts the unauthenticated connections closed to make
	// room for a new one.
	ClosedEvicted uint64
}

// The values of the reason label of sluice_front_door_connections_closed_total.
const (
	reasonConnectionLimit = "connection_limit"
	reasonEvicted         = "unauthenticated_evicted"
)

// ConnectionCollector is the prometheus.Collector of the front door's
// connections, read at scrape time: sluice_front_door_connections,
// sluice_front_door_unauthenticated_connections and
// sluice_front_door_connections_closed_total by reason.
type ConnectionCollector struct {
	src    func() ConnectionCounts
	open   *prometheus.Desc
	unauth *prometheus.Desc
	closed *prometheus.Desc
}

// NewConnectionCollector returns the collector of the counts src returns.
func NewConnectionCollector(src func() ConnectionCounts) *ConnectionCollector {
	return &ConnectionCollector{
		src: src,
		open: prometheus.NewDesc(nameFrontDoorConnections,
			"Front door connections open now (--max-connections bounds them).", nil, nil),
		unauth: prometheus.NewDesc(nameFrontDoorUnauthenticated,
			"Front door connections that have not carried an authenticated request yet (--max-unauthenticated-connections bounds them).",
			nil, nil),
		closed: prometheus.NewDesc(nameFrontDoorClosed,
			"Front door connections the router closed to stay within its connection limits: connection_limit (a new connection, every slot authenticated), unauthenticated_evicted (the oldest unauthenticated connection, to make room).",
			[]string{labelReason}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ConnectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.unauth
	ch <- c.closed
}

// Collect implements prometheus.Collector.
func (c *ConnectionCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.src()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(n.Open))
	ch <- prometheus.MustNewConstMetric(c.unauth, prometheus.GaugeValue, float64(n.Unauthenticated))
	ch <- prometheus.MustNewConstMetric(c.closed, prometheus.CounterValue, float64(n.ClosedOverLimit), reasonConnectionLimit)
	ch <- prometheus.MustNewConstMetric(c.closed, prometheus.CounterValue, float64(n.ClosedEvicted), reasonEvicted)
}

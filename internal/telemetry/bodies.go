package telemetry

import "github.com/prometheus/client_golang/prometheus"

// BodyBufferSource reports the request body bytes a router holds and its
// budget for them; router.Router implements it.
type BodyBufferSource interface {
	// BufferedBodyBytes returns the bytes held now and the budget.
	BufferedBodyBytes() (held, limit int64)
}

// BodyBufferCollector is the prometheus.Collector of the request body
// budget, read at scrape time: sluice_request_body_buffered_bytes (the
// capacity of the body buffers held now, all requests together) and
// sluice_request_body_buffer_limit_bytes (--max-buffered-body-bytes).
type BodyBufferCollector struct {
	src   BodyBufferSource
	held  *prometheus.Desc
	limit *prometheus.Desc
}

// NewBodyBufferCollector returns the collector of src.
func NewBodyBufferCollector(src BodyBufferSource) *BodyBufferCollector {
	return &BodyBufferCollector{
		src: src,
		held: prometheus.NewDesc(nameBodyBuffered,
			"Bytes of request body buffers the router holds now; a request whose body does not fit under the limit is refused with 503 body_buffer_exhausted.",
			nil, nil),
		limit: prometheus.NewDesc(nameBodyBufferLimit,
			"The budget of request body buffer bytes (--max-buffered-body-bytes).",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *BodyBufferCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.limit
}

// Collect implements prometheus.Collector.
func (c *BodyBufferCollector) Collect(ch chan<- prometheus.Metric) {
	held, limit := c.src.BufferedBodyBytes()
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(limit))
}

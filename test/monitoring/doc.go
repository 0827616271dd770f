// Package monitoring tests the monitoring bundle against the programs it
// watches: every metric name that a query of the Grafana dashboard
// (config/grafana) or an expression of the PrometheusRule
// (config/prometheus) selects must be in the exposition of a running router
// (built from cmd/router, with a tier applied and requests served through
// it, so that its histograms have series) or of a running manager (built
// from cmd/manager, against an envtest API server), or be a recording
// rule's name. It also checks the shape of the dashboard and of the rules.
// The tests build the binaries with go build, bind only loopback addresses,
// and need KUBEBUILDER_ASSETS (or bin/k8s) for the API server.
package monitoring

// Package promtool pins promtool, Prometheus' rule and configuration
// checker, in a module of its own, so that the Prometheus server's
// dependencies never enter the main module. The Makefile builds bin/promtool
// from here (`make bin/promtool`) for the monitoring bundle's rule tests
// (config/prometheus, `make test-monitoring`). Its test applies the routers'
// PodMonitor relabelings with Prometheus' own relabel package, which the main
// module cannot import for the same reason.
package promtool

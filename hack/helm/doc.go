// Package helm pins the helm CLI in a module of its own, so its dependencies
// (a Kubernetes client of another version among them) never enter the main
// module. The Makefile builds bin/helm with `go build` from here; the chart
// tests run it.
package helm

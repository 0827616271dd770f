// Package helm holds the tests of the Helm chart charts/sluice: helm lint,
// what each value renders, and the equivalence of the chart's default render
// with `kubectl kustomize config/default`. They run the helm that `make
// bin/helm` builds from hack/helm and fail when it is missing. They never
// reach a cluster; test/envtest submits the chart to a real API server.
package helm

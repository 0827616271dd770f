// Package gie pins the Gateway API Inference Extension's endpoint picker
// (cmd/epp of sigs.k8s.io/gateway-api-inference-extension) in a module of its
// own: the picker needs Kubernetes libraries of another minor version than
// the main module's, which therefore never enter it. build.sh builds the
// picker with `go build` from here and copies the InferencePool CRD of the
// same module version next to it; the cluster-picker test (test/gie) runs
// both.
package gie

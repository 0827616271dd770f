//go:build gie

// Package gie is the cluster-picker test: the Gateway API Inference
// Extension's endpoint picker, built from its pinned module (hack/gie),
// chooses among sluice routers on distinct loopback addresses, each in front
// of its own engines, and a small ext-proc client plays the gateway. The
// test runs in a network namespace of its own (the picker binds every
// interface), needs root for it, and runs with `make test-gie`.
package gie

// Package tools pins the versions of the build tools (controller-gen and
// golangci-lint) in a module of their own, so their dependencies never enter
// the main module. The Makefile builds them with `go build` from here.
package tools

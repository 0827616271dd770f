// Package build checks how the Makefile gets programs: every target that
// runs a program of this repository (make build, make demo, make
// run-manager, make soak) builds it with the one recipe of `make build`,
// static and stamped, so a program is compiled once whichever target runs
// first; and `make envtest-bins` downloads the envtest control plane with
// setup-envtest when the release index answers, gives up within seconds
// when it does not, and then builds it from source. The package has no code
// of its own, only tests; they run `make -n`, the envtest scripts against a
// release site on loopback, and make with a recording `go` in place of the
// minutes-long source build.
package build

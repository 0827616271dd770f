// Package build checks the Makefile's recipes for the programs: every
// target that runs a program of this repository (make build, make demo,
// make run-manager, make soak) builds it with the one recipe of
// `make build`, static and stamped, so a program is compiled once whichever
// target runs first. The package has no code of its own, only tests; they
// run `make -n`, which prints the recipes without running them.
package build

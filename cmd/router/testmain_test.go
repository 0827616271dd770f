package main

import (
	"os"
	"testing"
)

// childRouterEnv, set to 1, makes this test binary run the router command
// with its arguments instead of the tests: a test that measures the
// router's memory runs it in a process of its own (childRouter).
const childRouterEnv = "SLUICE_TEST_ROUTER_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(childRouterEnv) == "1" {
		main() // exits with status 1 on a failure.
		os.Exit(0)
	}
	os.Exit(m.Run())
}

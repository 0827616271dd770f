//go:build race

package e2e

// raceEnabled reports that the tests run with the race detector, so the
// processes are built with it as well.
const raceEnabled = true

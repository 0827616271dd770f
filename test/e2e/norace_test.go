//go:build !race

package e2e

// raceEnabled reports that the tests run without the race detector.
const raceEnabled = false

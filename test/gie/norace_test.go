//go:build gie && !race

package gie

// raceEnabled reports that the tests run without the race detector.
const raceEnabled = false

//go:build gie && race

package gie

// raceEnabled reports that the tests run with the race detector, so the
// router and enginesim are built with it too.
const raceEnabled = true

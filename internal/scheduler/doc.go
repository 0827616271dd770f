// Package scheduler holds the pure values and functions that rank the members of
// one replica tier: Normalize turns one engine sample into a Pressure, and Rank
// orders the eligible candidates by local load, upstream pressure and a rotating
// tie break. Pressure.Validate and Decision.Validate check the invariants every
// Normalize and Rank result satisfies, for callers that receive such values
// from elsewhere; invalid inputs return the fixed errors of errors.go. The scoring
// contract is written out in docs/SCORING.md.
//
// The package owns no state. It must never read a clock, perform I/O, take a
// lock or import another package of this project: time and inputs are handed
// in, decisions are handed out, and the same inputs always give the same
// Decision.
package scheduler

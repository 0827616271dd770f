// Package sourcetest builds the source.Tier values and Snapshots that the
// tests of the packages serving tiers apply: a defaulted ReplicaTier on one
// node from a key, aliases, a strategy and its members, with any further
// change to its spec.
//
// It owns test fixtures only. It must never be imported by code that ships
// in a binary, and it never validates what it builds, so that tests may use
// bounds (sub-second upstream timeouts) that validation refuses.
package sourcetest

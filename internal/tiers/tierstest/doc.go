// Package tierstest holds fakes of what a tier set reads, for the tests of
// the packages that build one (router, adminserver, telemetry, tiers): a
// readiness view and rechecker, a pressure view that counts its two kinds
// of reads, and a host address source, each set by the test.
//
// It owns test fixtures only. It must never be imported by code that ships
// in a binary, and its fakes never wait: every method returns what the test
// set last.
package tierstest

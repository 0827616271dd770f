// Package cli holds the tests of the command line every sluice program
// shares (internal/cmdline): they build each program once and run it as a
// user does, checking that --help prints help with an example on stdout
// and exits 0, that --version exits 0, and that a usage error prints a
// line and a hint on stderr and exits 2. The programs are never started
// for real: every command line the tests give ends before one listens or
// connects.
package cli

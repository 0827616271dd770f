// Package cmdline owns the command line conventions every sluice program
// shares: help (with examples) on stdout and exit status 0 for --help and
// -h, --version printing internal/version's line, a one-line error and a
// hint on stderr with exit status 2 for a usage error, one --log-level flag
// (debug, info, warn or error, in any case), and deprecated aliases that
// keep an old flag spelling working for one release and say so once.
//
// It parses and prints; it never exits the process, starts anything or
// reads the environment: each program's main turns the result into its
// exit status.
package cmdline

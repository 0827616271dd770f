//go:build linux

package main

import "errors"

// errProcStatus reports a /proc file without a field the harness needs.
var errProcStatus = errors.New("harness: unexpected /proc file")

// mib converts KiB to MiB.
func mib(kib int64) float64 { return float64(kib) / 1024 }

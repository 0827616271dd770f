// Package memberpoll is the runtime that polls the members of the tiers on
// this node on behalf of a client: the readiness probes and the pressure
// samples (docs/ARCHITECTURE.md, docs/PRESSURE.md).
//
// It owns registration (Reconfigure validates tier keys, member ids and the
// api/bounds limits, keeps an unchanged member's state and cancels a changed
// or removed member's collection), due logic on an injected clock, a bounded
// pool of workers fed by a FIFO that holds each member at most once, the
// single-flight rule (never two collections of one member at once), and
// cancellation on Reconfigure, Stop and Close. A client defines only how to
// collect one member (Options.Collect) and how to project its latest result
// at read time (Options.Project).
//
// The runtime never holds its lock while collecting, never starts a
// goroutine per read or per collection, and never makes a read wait.
package memberpoll

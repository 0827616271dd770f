package tierstest

import (
	"net/netip"
	"sync"
)

// HostAddrs is a host address source whose addresses and error the test
// sets, and which counts its reads; its Read method is a tiers.HostAddrs.
// It is safe for concurrent use.
type HostAddrs struct {
	mu    sync.Mutex
	addrs []netip.Addr
	err   error
	reads int
}

// Read returns the addresses and error set last, and counts the call.
func (f *HostAddrs) Read() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.addrs, f.err
}

// Set makes Read return err and addrs, each parsed with
// netip.MustParseAddr.
func (f *HostAddrs) Set(err error, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs, f.err = nil, err
	for _, a := range addrs {
		f.addrs = append(f.addrs, netip.MustParseAddr(a))
	}
}

// Reads returns how often Read was called.
func (f *HostAddrs) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

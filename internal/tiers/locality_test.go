package tiers

import (
	"errors"
	"testing"

	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// TestHostAddrSetLocal proves which endpoint hosts count as this host's:
// localhost, 127.0.0.0/8 and ::1 without reading the addresses, and this
// host's addresses compared as unmapped addresses without zones; nothing
// else, not the unspecified addresses and not a name.
func TestHostAddrSetLocal(t *testing.T) {
	for _, tc := range []struct {
		host      string
		local     bool
		needsRead bool
	}{
		{"localhost", true, false},
		{"LocalHost", true, false},
		{"127.0.0.1", true, false},
		{"127.8.9.10", true, false},
		{"::1", true, false},
		{"::1%lo", true, false},
		{"::ffff:127.0.0.1", true, false},
		{"192.0.2.10", true, true},
		{"::ffff:192.0.2.10", true, true},
		{"2001:db8::10", true, true},
		{"fe80::1%eth0", true, true},
		{"fe80::1", true, true},
		{"192.0.2.20", true, true}, // listed by the source as IPv4-mapped IPv6.
		{"192.0.2.11", false, true},
		{"::ffff:192.0.2.11", false, true},
		{"2001:db8::11", false, true},
		{"fe80::2%eth0", false, true},
		{"0.0.0.0", false, true},
		{"::", false, true},
		{"engine.internal", false, false},
		{"", false, false},
	} {
		src := &tierstest.HostAddrs{}
		src.Set(nil, "192.0.2.10", "2001:db8::10", "fe80::1%eth0", "::ffff:192.0.2.20")
		set := &hostAddrSet{source: src.Read}
		got, err := set.local(tc.host)
		if err != nil || got != tc.local {
			t.Errorf("local(%q) = %v, %v; want %v", tc.host, got, err, tc.local)
		}
		if reads := src.Reads(); reads != map[bool]int{false: 0, true: 1}[tc.needsRead] {
			t.Errorf("local(%q) read the addresses %d times", tc.host, reads)
		}
		_, _ = set.local(tc.host)
		if reads := src.Reads(); reads > 1 {
			t.Errorf("a second local(%q) read the addresses again: %d reads", tc.host, reads)
		}
	}

	failing := &tierstest.HostAddrs{}
	failing.Set(errors.New("netlink: no such device"))
	set := &hostAddrSet{source: failing.Read}
	if ok, err := set.local("127.0.0.1"); !ok || err != nil {
		t.Errorf("loopback with a failing source = %v, %v", ok, err)
	}
	if ok, err := set.local("192.0.2.10"); ok || !errors.Is(err, errHostAddrs) {
		t.Errorf("non-loopback with a failing source = %v, %v; want errHostAddrs", ok, err)
	}
}

// TestInterfaceAddrs proves the default address source reads this host's
// interfaces: every host has a loopback interface, and every address comes
// back valid and unmapped, as hostAddrSet compares them.
func TestInterfaceAddrs(t *testing.T) {
	addrs, err := InterfaceAddrs()
	if err != nil {
		t.Fatalf("InterfaceAddrs: %v", err)
	}
	loopback := false
	for _, a := range addrs {
		if !a.IsValid() || a.Is4In6() {
			t.Errorf("address %v is not valid and unmapped", a)
		}
		loopback = loopback || a.IsLoopback()
	}
	if !loopback {
		t.Fatalf("InterfaceAddrs = %v, want a loopback address among them", addrs)
	}
}

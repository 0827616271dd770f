package tiers

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// HostAddrs returns the addresses of the host the router runs on. Apply
// reads it when a tier with memberLocality SameHost names a member whose
// endpoint host is not loopback (docs/ROUTER.md#5-configuration-changes).
type HostAddrs func() ([]netip.Addr, error)

// InterfaceAddrs returns the addresses of this host's network interfaces
// (net.InterfaceAddrs), the default HostAddrs. The router's DaemonSet runs
// with hostNetwork, so in a cluster these are the node's addresses.
func InterfaceAddrs() ([]netip.Addr, error) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ifaddrs))
	for _, a := range ifaddrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// errHostAddrs is the host address source's failure, kept out of messages:
// only its fact is reported.
var errHostAddrs = errors.New("host addresses unavailable")

// hostAddrSet reads a HostAddrs at most once, on first use: Apply makes
// one per snapshot, so an address change takes effect at the next
// configuration change.
type hostAddrSet struct {
	source HostAddrs
	read   bool
	addrs  map[netip.Addr]bool // unmapped, without zones.
	err    error
}

// local reports whether host, an endpoint's host as url.URL.Hostname
// returns it (no brackets), is loopback or one of this host's addresses.
// localhost counts as loopback. An IPv4-mapped IPv6 address is compared as
// its IPv4 address, and an IPv6 zone is not compared: the address is. A
// name other than localhost is never local. The error is errHostAddrs when
// host is not loopback and the addresses could not be read.
func (s *hostAddrSet) local(host string) (bool, error) {
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false, nil
	}
	addr = addr.WithZone("").Unmap()
	if addr.IsLoopback() {
		return true, nil
	}
	if !s.read {
		s.read = true
		var list []netip.Addr
		if s.source != nil {
			list, s.err = s.source()
		}
		if s.err != nil {
			s.err = fmt.Errorf("%w: %w", errHostAddrs, s.err)
		}
		s.addrs = make(map[netip.Addr]bool, len(list))
		for _, a := range list {
			s.addrs[a.WithZone("").Unmap()] = true
		}
	}
	if s.err != nil {
		return false, s.err
	}
	return s.addrs[addr], nil
}

// checkLocality refuses a member of a SameHost tier whose endpoint host is
// neither loopback nor an address of this host. The message names the
// member and the rule, never the endpoint.
func checkLocality(s *v1alpha1.ReplicaTierSpec, id, host string, addrs *hostAddrSet) error {
	if s.EffectiveMemberLocality() != v1alpha1.MemberLocalitySameHost {
		return nil
	}
	ok, err := addrs.local(host)
	switch {
	case err != nil:
		return fmt.Errorf("%w: member %s: endpoint host is not loopback and this node's addresses could not be read (spec.memberLocality: SameHost)", ErrMemberNotLocal, id)
	case !ok:
		return fmt.Errorf("%w: member %s: endpoint host is not loopback or an address of this node (spec.memberLocality: SameHost)", ErrMemberNotLocal, id)
	}
	return nil
}

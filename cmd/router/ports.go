package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// errAddressInUse is returned by listenOwned when another process listens
// on the address and is not a router of this uid handing it over.
var errAddressInUse = errors.New("another process listens on the address, and it is not a router of this uid handing it over")

// listenOwned opens address's listener (listen) unless another process
// listens there already that is not this router's predecessor: a router
// of this uid holding the handover channel of frontAddress, this router's
// front door address. SO_REUSEPORT would let any socket of this uid join
// the address's group, and its steering program would send new
// connections to the newest: a plain bind (no SO_REUSEPORT) first finds
// whether anyone listens, and only a verified predecessor makes that
// acceptable (docs/ROUTER.md#81-handing-the-ports-over).
func listenOwned(ctx context.Context, address, frontAddress string) (net.Listener, error) {
	if err := checkAddress(ctx, address, frontAddress); err != nil {
		return nil, err
	}
	return listen(ctx, address)
}

// checkAddress returns nil when nobody listens on address, or when the
// process that does is a verified predecessor (verifyPredecessor), and an
// error wrapping errAddressInUse, naming the address, otherwise.
func checkAddress(ctx context.Context, address, frontAddress string) error {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false) // as listen binds.
	probe, err := lc.Listen(ctx, "tcp", address)
	if err == nil {
		return probe.Close()
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	if err := verifyPredecessor(ctx, frontAddress); err != nil {
		return fmt.Errorf("%s: %w: %w", address, errAddressInUse, err)
	}
	return nil
}

// verifyPredecessor returns nil when a router of this uid holds the
// handover channel of frontAddress: it connects, checks the peer's uid
// (checkPeer) and closes, without a hello, which the predecessor ignores.
func verifyPredecessor(ctx context.Context, frontAddress string) error {
	addr, err := net.ResolveTCPAddr("tcp", frontAddress)
	if err != nil {
		return err
	}
	name := handoverName(addr.String())
	dctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	conn, err := dialHandover(dctx, name)
	if err != nil {
		return fmt.Errorf("no router holds the handover channel %s: %w", name, err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := checkPeer(conn); err != nil {
		return fmt.Errorf("handover channel %s: %w", name, err)
	}
	return nil
}

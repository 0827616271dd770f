//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// errHandoverNameTaken is returned by listenHandover when another router
// holds the channel's name: it is the predecessor.
var errHandoverNameTaken = errors.New("handover channel name taken")

// listenHandover listens on the abstract unix socket name (a leading @).
// Abstract names live in the network namespace, which both routers of a
// node share with host networking, and vanish with their socket. Any
// process of the namespace can connect to them, whatever its uid: every
// peer is checked with checkPeer.
func listenHandover(name string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "unix", name)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w: %w", errHandoverNameTaken, err)
	}
	return ln, err
}

// dialHandover connects to the router listening on name.
func dialHandover(ctx context.Context, name string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", name)
}

// checkPeer returns the process at the other end of conn, a handover
// channel's connection, as the kernel recorded it when it connected or
// listened (SO_PEERCRED), and an error wrapping errForeignPeer unless its
// effective uid is this process's own.
func checkPeer(conn net.Conn) (peer, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return peer{}, fmt.Errorf("%w: not a unix socket", errForeignPeer)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) //nolint:gosec // A file descriptor fits an int.
	}); err != nil {
		return peer{}, err
	}
	if cerr != nil {
		return peer{}, fmt.Errorf("reading the peer's credentials: %w", cerr)
	}
	p := peer{uid: cred.Uid, pid: cred.Pid}
	if own := os.Geteuid(); int64(p.uid) != int64(own) {
		return p, fmt.Errorf("%w: uid %d, this router's is %d", errForeignPeer, p.uid, own)
	}
	return p, nil
}

//go:build !linux

package main

import (
	"context"
	"errors"
	"net"
)

// errHandoverNameTaken is never returned here: without Linux's abstract
// unix sockets there is no handover channel.
var errHandoverNameTaken = errors.New("handover channel name taken")

// errNoHandover is returned by listenHandover, dialHandover and checkPeer:
// a second router cannot bind the ports anyway (see listen), so there is
// nothing to hand over.
var errNoHandover = errors.New("no lease handover on this platform")

// listenHandover returns errNoHandover.
func listenHandover(string) (net.Listener, error) { return nil, errNoHandover }

// dialHandover returns errNoHandover.
func dialHandover(context.Context, string) (net.Conn, error) { return nil, errNoHandover }

// checkPeer returns errNoHandover.
func checkPeer(net.Conn) (peer, error) { return peer{}, errNoHandover }

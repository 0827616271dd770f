//go:build linux

package main

import (
	"context"
	"net"
	"testing"
	"time"
)

// steeringDials is how many connections TestListenSteersToNewest opens at
// each step: were they spread by the kernel's hash, the chance that all
// reach one of two listeners would be 2^-32.
const steeringDials = 32

// TestListenSteersToNewest: a second listener binds the address of a first
// one, and from then on every new connection reaches the second; once the
// first closes, connections still reach the second.
func TestListenSteersToNewest(t *testing.T) {
	ctx := context.Background()
	older, err := listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = older.Close() }()
	addr := older.Addr().String()
	newer, err := listen(ctx, addr)
	if err != nil {
		t.Fatalf("a second listener cannot bind the same address: %v", err)
	}
	defer func() { _ = newer.Close() }()

	accepted := make(chan string, 2*steeringDials)
	acceptAll := func(name string, ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			accepted <- name
		}
	}
	go acceptAll("older", older)
	go acceptAll("newer", newer)
	dial := func() {
		t.Helper()
		for range steeringDials {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
		}
		for range steeringDials {
			select {
			case name := <-accepted:
				if name != "newer" {
					t.Fatalf("a connection reached the %s listener", name)
				}
			case <-time.After(failSafe):
				t.Fatal("a connection was not accepted")
			}
		}
	}
	dial()
	if err := older.Close(); err != nil {
		t.Fatal(err)
	}
	dial()
}

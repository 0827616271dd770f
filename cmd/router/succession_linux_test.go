//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/handover"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// TestSuccessionResumesWhenSuccessorLeaves hands the admission over to a
// successor that then closes the channel: while handed over, requests are
// forwarded, status reports stop and configuration is held back; once the
// successor left, the router serves itself again and applies the newest
// configuration.
func TestSuccessionResumesWhenSuccessorLeaves(t *testing.T) {
	applied := make(chan source.Snapshot, 1)
	handedOver := make(chan struct{}, 1)
	rt := router.New(router.Options{})
	s := newSuccession(rt, slog.New(slog.DiscardHandler), func(snap source.Snapshot) { applied <- snap }, func() { handedOver <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); s.stop() }()
	addr := fmt.Sprintf("127.0.0.1:%d-%s", time.Now().UnixNano(), t.Name()) // a name no other test uses.
	s.start(ctx, addr)
	select {
	case <-s.opened:
	default:
		t.Fatal("no predecessor, yet the gate is closed")
	}
	conn, err := dialHandover(ctx, handoverName(addr))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, `{"kind":"hello","version":"`+handover.Version+`"}`+"\n")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, `"kind":"snapshot"`) {
		t.Fatalf("snapshot %q, %v", line, err)
	}
	<-handedOver
	if !s.forwarding.Load() {
		t.Fatal("not forwarding after the snapshot")
	}
	s.configure(source.Snapshot{Tiers: []source.Tier{{Key: "ns/held-back"}}})
	select {
	case <-applied:
		t.Fatal("configuration applied while handed over")
	default:
	}
	_ = conn.Close()
	select {
	case snap := <-applied:
		if len(snap.Tiers) != 1 || snap.Tiers[0].Key != "ns/held-back" {
			t.Fatalf("applied %+v, want the snapshot held back", snap)
		}
	case <-time.After(failSafe):
		t.Fatal("the held-back configuration was not applied after the successor left")
	}
	if s.forwarding.Load() {
		t.Fatal("still forwarding after the successor left")
	}
}

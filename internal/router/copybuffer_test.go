package router

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestQuietStreamsHoldNoCopyBuffer proves a stream waiting for its next
// event holds no copy buffer: with the free list full, streams that each
// passed one event on and now wait for the next leave it full, and every
// stream still completes once its member goes on.
func TestQuietStreamsHoldNoCopyBuffer(t *testing.T) {
	const streams = 4
	fillCopyBuffers(t)
	f := newFixture(t, fixtureOptions{})
	gpu0 := newUpstream(t, "gpu0", nil)
	next := make(chan struct{})
	goOn := sync.OnceFunc(func() { close(next) })
	defer goOn() // a failed test lets the members end too.
	gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
		sseHeaders(w)
		writeEvents(w, sseEvents[0])
		<-next
		writeEvents(w, sseEvents[1:]...)
	})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: streams}}))

	bodies := make([]io.ReadCloser, 0, streams)
	defer func() {
		for _, b := range bodies {
			_ = b.Close()
		}
	}()
	for range streams {
		resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil) //nolint:bodyclose // closed by the deferred loop.
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		if _, err := io.ReadFull(resp.Body, make([]byte, len(sseEvents[0]))); err != nil {
			t.Fatal(err)
		}
	}
	waitRelaysBlocked(t, streams)
	if held := cap(copyBufferList) - len(copyBufferList); held != 0 {
		t.Fatalf("%d quiet streams hold %d copy buffers, want 0", streams, held)
	}

	goOn()
	for _, b := range bodies {
		rest, err := io.ReadAll(b)
		if err != nil || string(rest) != strings.Join(sseEvents[1:], "") {
			t.Fatalf("rest of a stream: %q, %v", rest, err)
		}
	}
	f.assertIdle("ns/llama")
}

// fillCopyBuffers fills the copy buffers' free list for the test and
// restores what it held afterwards.
func fillCopyBuffers(t *testing.T) {
	t.Helper()
	var saved [][]byte
	for len(copyBufferList) > 0 {
		saved = append(saved, <-copyBufferList)
	}
	for len(copyBufferList) < cap(copyBufferList) {
		copyBufferList <- make([]byte, copyBufferSize)
	}
	t.Cleanup(func() {
		for len(copyBufferList) > 0 {
			<-copyBufferList
		}
		for _, b := range saved {
			copyBufferList <- b
		}
	})
}

// waitRelaysBlocked waits until n exchanges' relays are blocked on the
// network (goroutines in IO wait under exchange.relay).
func waitRelaysBlocked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(failSafe)
	buf := make([]byte, 1<<20)
	for {
		blocked := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "[IO wait") && strings.Contains(g, "router.(*exchange).relay") {
				blocked++
			}
		}
		if blocked == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d relays blocked on the network, want %d", blocked, n)
		}
		runtime.Gosched()
	}
}

package router

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/upstream"
)

// exchangeEvent is one step of an exchange: serve takes them in this order
// (gotHeaders, then bodyBytes and bodyEnded per read, then served from its
// deferred end; failed instead of all of them before response headers).
type exchangeEvent struct {
	name string
	fire func(ex *exchange)
}

var (
	evHeaders    = exchangeEvent{"headers", func(ex *exchange) { ex.gotHeaders(http.StatusOK, nil) }}
	evBodyEOF    = exchangeEvent{"body EOF", func(ex *exchange) { ex.bodyEnded(io.EOF) }}
	evBodyReset  = exchangeEvent{"body reset", func(ex *exchange) { ex.bodyEnded(syscall.ECONNRESET) }}
	evBodyIdle   = exchangeEvent{"body idle timeout", func(ex *exchange) { ex.bodyEnded(os.ErrDeadlineExceeded) }}
	evRefused    = exchangeEvent{"dial refused", func(ex *exchange) { ex.failed(fmt.Errorf("%w: dial", upstream.ErrRefused)) }}
	evReset      = exchangeEvent{"reset before headers", func(ex *exchange) { ex.failed(fmt.Errorf("%w: read", upstream.ErrReset)) }}
	evHeaderTime = exchangeEvent{"header timeout", func(ex *exchange) { ex.failed(os.ErrDeadlineExceeded) }}
	evReturned   = exchangeEvent{"serve returned", func(ex *exchange) { ex.served(true) }}
	evSSEHeaders = exchangeEvent{"event-stream headers", func(ex *exchange) {
		ex.gotHeaders(http.StatusOK, []string{"text/event-stream; charset=utf-8"})
	}}
	evSSE4xx = exchangeEvent{"event-stream 4xx headers", func(ex *exchange) {
		ex.gotHeaders(http.StatusTooManyRequests, []string{"Text/Event-Stream"})
	}}
	evEvent     = exchangeEvent{"event", func(ex *exchange) { ex.bodyBytes([]byte("data: {}\n\n")) }}
	evDone      = exchangeEvent{"[DONE]", func(ex *exchange) { ex.bodyBytes([]byte("data: [DONE]\n\n")) }}
	evBadLine   = exchangeEvent{"bad line", func(ex *exchange) { ex.bodyBytes([]byte("oops\n")) }}
	evBodyShort = exchangeEvent{"body unexpected EOF", func(ex *exchange) { ex.bodyEnded(io.ErrUnexpectedEOF) }}
	// evAborted is serve's end after the relay to the client failed or
	// panicked.
	evAborted = exchangeEvent{"relay aborted", func(ex *exchange) { ex.served(false) }}
)

// TestExchangeReleasesOnce drives an exchange through every path serve
// takes, step by step, and checks that the lease is released exactly once,
// at the first step that ends the exchange, and how the outcome ends.
func TestExchangeReleasesOnce(t *testing.T) {
	tests := []struct {
		desc      string
		events    []exchangeEvent
		releaseAt int // index of the event that releases the lease.
		wantEnd   End
		wantEject Ejection
	}{
		{desc: "complete", events: []exchangeEvent{evHeaders, evBodyEOF, evReturned},
			releaseAt: 1, wantEnd: EndComplete},
		{desc: "relay fails before EOF", events: []exchangeEvent{evHeaders, evEvent, evAborted},
			releaseAt: 2, wantEnd: EndAborted},
		{desc: "reset mid-body", events: []exchangeEvent{evHeaders, evBodyReset, evAborted},
			releaseAt: 1, wantEnd: EndUpstreamError},
		{desc: "idle timeout mid-body", events: []exchangeEvent{evHeaders, evBodyIdle, evAborted},
			releaseAt: 1, wantEnd: EndIdleTimeout},
		{desc: "relay panics mid-body", events: []exchangeEvent{evHeaders, evAborted},
			releaseAt: 1, wantEnd: EndAborted},
		{desc: "relay panics after EOF", events: []exchangeEvent{evHeaders, evBodyEOF, evAborted},
			releaseAt: 1, wantEnd: EndAborted},
		{desc: "dial refused", events: []exchangeEvent{evRefused, evReturned},
			releaseAt: 0, wantEnd: EndUnavailable, wantEject: EjectRefused},
		{desc: "reset before headers", events: []exchangeEvent{evReset, evReturned},
			releaseAt: 0, wantEnd: EndUnavailable, wantEject: EjectReset},
		{desc: "header timeout", events: []exchangeEvent{evHeaderTime, evReturned},
			releaseAt: 0, wantEnd: EndHeaderTimeout},
		{desc: "panic before anything", events: []exchangeEvent{evAborted},
			releaseAt: 0, wantEnd: EndAborted},
		{desc: "returned without an answer", events: []exchangeEvent{evReturned},
			releaseAt: 0, wantEnd: EndAborted},
		{desc: "event stream complete", events: []exchangeEvent{evSSEHeaders, evEvent, evDone, evBodyEOF, evReturned},
			releaseAt: 3, wantEnd: EndComplete},
		{desc: "event stream without [DONE]", events: []exchangeEvent{evSSEHeaders, evEvent, evBodyEOF, evReturned},
			releaseAt: 2, wantEnd: EndTruncated},
		{desc: "event stream malformed", events: []exchangeEvent{evSSEHeaders, evBadLine, evDone, evBodyEOF, evReturned},
			releaseAt: 3, wantEnd: EndMalformed},
		{desc: "event stream without [DONE], relay panics", events: []exchangeEvent{evSSEHeaders, evEvent, evBodyEOF, evAborted},
			releaseAt: 2, wantEnd: EndAborted},
		{desc: "malformed event stream reset", events: []exchangeEvent{evSSEHeaders, evBadLine, evBodyReset, evAborted},
			releaseAt: 2, wantEnd: EndUpstreamError},
		{desc: "event stream 4xx not inspected", events: []exchangeEvent{evSSE4xx, evBadLine, evBodyEOF, evReturned},
			releaseAt: 2, wantEnd: EndComplete},
		{desc: "other media type not inspected", events: []exchangeEvent{evHeaders, evBadLine, evBodyEOF, evReturned},
			releaseAt: 2, wantEnd: EndComplete},
		{desc: "body ends before its length", events: []exchangeEvent{evHeaders, evBodyShort, evAborted},
			releaseAt: 1, wantEnd: EndTruncated},
		{desc: "late events after the end", events: []exchangeEvent{evHeaders, evBodyEOF, evHeaders, evBodyReset, evReturned},
			releaseAt: 1, wantEnd: EndComplete},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ex, releases, outcomes, rechecks := newTestExchange(t)
			for i, ev := range tt.events {
				ev.fire(ex)
				want := 0
				if i >= tt.releaseAt {
					want = 1
				}
				if *releases != want || ex.settled != (want == 1) {
					t.Fatalf("after %q (event %d): %d releases (settled %v), want %d", ev.name, i, *releases, ex.settled, want)
				}
			}
			if len(*outcomes) != 1 {
				t.Fatalf("%d outcomes recorded, want 1", len(*outcomes))
			}
			o := (*outcomes)[0]
			if o.End != tt.wantEnd || o.Ejection != tt.wantEject {
				t.Errorf("outcome end %q ejection %q, want %q %q", o.End, o.Ejection, tt.wantEnd, tt.wantEject)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantEject != ""]; *rechecks != want {
				t.Errorf("%d rechecks, want %d", *rechecks, want)
			}
		})
	}
}

// rechecksFunc is a Rechecker calling a function.
type rechecksFunc func(tier, member string)

func (f rechecksFunc) Recheck(tier, member string) { f(tier, member) }

// newTestExchange returns an admitted exchange of member gpu0 of a one-member
// tier, and counters of its releases, recorded outcomes and rechecks. Its
// client context is live and nothing is connected.
func newTestExchange(t *testing.T) (*exchange, *int, *[]Outcome, *int) {
	t.Helper()
	var (
		releases int
		rechecks int
		outcomes []Outcome
	)
	rt := New(Options{
		Recorder: recorderFunc(func(o Outcome) { outcomes = append(outcomes, o) }),
		Rechecker: rechecksFunc(func(tier, member string) {
			if tier != "ns/llama" || member != "gpu0" {
				t.Errorf("Recheck(%s, %s), want ns/llama gpu0", tier, member)
			}
			rechecks++
		}),
		OnRelease: func(string, string) { releases++ },
	})
	t.Cleanup(rt.Close)
	rt.Tiers().Apply(sourcetest.Snapshot(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:1", Max: 1}})))
	ts, _ := rt.Tiers().Table().Lookup("ns/llama")
	lease, err := ts.Admission().Acquire(admission.Inputs{Ready: map[string]bool{"gpu0": true}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ts.Config()
	ex := &exchange{rt: rt, tier: ts, route: cfg.Member("gpu0"), lease: lease, in: context.Background(),
		outcome: Outcome{Result: ResultAdmitted, Member: "gpu0", Tier: ts.Key()}}
	return ex, &releases, &outcomes, &rechecks
}

package router

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/evidence"
)

// checkRecord checks that o's decision record survives the strict
// ingestion of its JSON form, so the readmission never writes a record the
// decision file's readers refuse.
func checkRecord(t *testing.T, o Outcome) {
	t.Helper()
	rec := o.Evidence()
	b, err := rec.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.ParseRecord(b[:len(b)-1]); err != nil {
		t.Fatalf("decision record %s refused: %v", b, err)
	}
}

// checkBodiesReleased checks no request body buffer is held any more: the
// body kept for the second admission was released, once.
func checkBodiesReleased(t *testing.T, f *fixture) {
	t.Helper()
	if held, _ := f.rt.BufferedBodyBytes(); held != 0 {
		t.Fatalf("%d body bytes still held", held)
	}
}

// TestNotSentReadmitted proves, for RoundRobin and Capacity, that a
// request whose member refused the connection (not a byte of it written)
// is admitted again without that member and served by another one: the
// client gets the other member's 200, the refusing member is ejected
// (Recheck once), both leases are released once, the other member gets
// the body with the served model, and the outcome names the member the
// request was not sent to.
func TestNotSentReadmitted(t *testing.T) {
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			gpu1 := newUpstream(t, "gpu1", nil)
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))

			resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
			if resp.StatusCode != http.StatusOK || resp.Header.Get(headerMember) != "gpu1" {
				t.Fatalf("got %d from %q: %s, want 200 from gpu1", resp.StatusCode, resp.Header.Get(headerMember), body)
			}
			o := f.outcome()
			if o.Result != ResultAdmitted || o.Member != "gpu1" || o.End != EndComplete || o.Ejection != "" ||
				o.NotSentMember != "gpu0" || o.NotSentEjection != EjectRefused {
				t.Fatalf("outcome %+v, want gpu1 complete after gpu0 refused", o)
			}
			if (strategy == v1alpha1.StrategyCapacity) != (o.Selection != nil && o.Selection.SelectedMemberID == "gpu1") {
				t.Fatalf("selection %+v, want gpu1's exactly for Capacity", o.Selection)
			}
			checkRecord(t, o)
			if n := f.ready.RecheckCalls("ns/llama", "gpu0"); n != 1 {
				t.Fatalf("Recheck(gpu0) called %d times, want 1", n)
			}
			if gpu1.requests.Load() != 1 || string(gpu1.seen[0].body) != chat("served/model") {
				t.Fatalf("gpu1 saw %d requests, want 1 with the served model", gpu1.requests.Load())
			}
			if f.releaseCalls("ns/llama", "gpu0") != 1 || f.releaseCalls("ns/llama", "gpu1") != 1 || f.totalReleases() != 2 {
				t.Fatalf("releases gpu0 %d, gpu1 %d (total %d), want 1 each", f.releaseCalls("ns/llama", "gpu0"),
					f.releaseCalls("ns/llama", "gpu1"), f.totalReleases())
			}
			f.assertIdle("ns/llama")
			checkBodiesReleased(t, f)
		})
	}
}

// TestNotSentReadmittedOnce proves a request goes back to admission once
// at most: when the second member refuses the connection as well, the
// client gets 502 upstream_unavailable from that attempt, with each member
// ejected once and each lease released once; and when the tier has no
// other member, the second admission's refusal (503 no_eligible_member with
// Retry-After).
func TestNotSentReadmittedOnce(t *testing.T) {
	t.Run("two refusing members", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{})
		f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 2}, {ID: "gpu1", Endpoint: closedAddress(t), Max: 2}}))
		resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
		if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
			t.Fatalf("got %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
		}
		o := f.outcome()
		if o.Result != ResultAdmitted || o.End != EndUnavailable || o.Ejection != EjectRefused ||
			o.NotSentEjection != EjectRefused || o.NotSentMember == "" || o.NotSentMember == o.Member {
			t.Fatalf("outcome %+v, want the second member's 502 after the first refused", o)
		}
		if resp.Header.Get(headerMember) != o.Member {
			t.Fatalf("%s = %q, want %q", headerMember, resp.Header.Get(headerMember), o.Member)
		}
		checkRecord(t, o)
		for _, m := range []string{"gpu0", "gpu1"} {
			if n := f.ready.RecheckCalls("ns/llama", m); n != 1 {
				t.Fatalf("Recheck(%s) called %d times, want 1", m, n)
			}
			if n := f.releaseCalls("ns/llama", m); n != 1 {
				t.Fatalf("%s released %d times, want 1", m, n)
			}
		}
		f.assertIdle("ns/llama")
		checkBodiesReleased(t, f)
	})
	t.Run("only member refuses", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{})
		f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 2}}))
		resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
		if resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, body) != "no_eligible_member" ||
			resp.Header.Get("Retry-After") == "" || resp.Header.Get(headerMember) != "" {
			t.Fatalf("got %d %v %s, want 503 no_eligible_member with Retry-After and no member", resp.StatusCode, resp.Header, body)
		}
		o := f.outcome()
		if o.Result != ResultNotAdmitted || o.Member != "" || o.End != "" || o.Code != "no_eligible_member" ||
			o.NotSentMember != "gpu0" || o.NotSentEjection != EjectRefused {
			t.Fatalf("outcome %+v, want not admitted after gpu0 refused", o)
		}
		checkRecord(t, o)
		if f.releaseCalls("ns/llama", "gpu0") != 1 || f.totalReleases() != 1 {
			t.Fatalf("releases %d, want 1", f.totalReleases())
		}
		f.assertIdle("ns/llama")
		checkBodiesReleased(t, f)
	})
}

// TestSentIsOneAttempt proves a request that may have reached the engine
// is never sent twice: a member that accepts the connection, reads part of
// the request and resets it gives the client 502 upstream_unavailable, as
// one attempt, and the other member never sees the request.
func TestSentIsOneAttempt(t *testing.T) {
	var read atomic.Int64
	engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		buf := make([]byte, 16)
		n, _ := io.ReadFull(br, buf)
		read.Add(int64(n))
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // Close resets.
		}
		_ = c.Close()
	})
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			gpu1 := newUpstream(t, "gpu1", nil)
			before := engine.acceptedConns()
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: engine.url, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))
			resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
			if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
				t.Fatalf("got %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
			}
			o := f.outcome()
			if o.Member != "gpu0" || o.End != EndUnavailable || o.Ejection != EjectReset || o.NotSentMember != "" {
				t.Fatalf("outcome %+v, want gpu0's one attempt, reset", o)
			}
			if n := engine.acceptedConns() - before; n != 1 || gpu1.requests.Load() != 0 {
				t.Fatalf("gpu0 accepted %d connections, gpu1 saw %d requests; want 1 and 0", n, gpu1.requests.Load())
			}
			if f.totalReleases() != 1 {
				t.Fatalf("releases %d, want 1", f.totalReleases())
			}
			f.assertIdle("ns/llama")
			checkBodiesReleased(t, f)
		})
	}
	if read.Load() == 0 {
		t.Fatal("the engine read no request byte")
	}
}

// TestNotSentHandedOver proves a request its member never saw, whose tier's
// admission was handed over to a successor before the second admission,
// goes to the successor (Options.HandedOver) with the client's body
// readable again, reaching no other member and holding no body buffer.
func TestNotSentHandedOver(t *testing.T) {
	var (
		ts       *tiers.Tier
		handover *admission.Handover
	)
	f := newFixture(t, fixtureOptions{onRelease: func(string, string) {
		// The first lease's release, between the two admissions.
		h, _, err := ts.Admission().HandOver(make(chan struct{}, 1))
		if err != nil {
			t.Error(err)
			return
		}
		handover = h
	}})
	gpu1 := newUpstream(t, "gpu1", nil)
	var forwarded []byte
	f.rt.handedOver = func(w http.ResponseWriter, r *http.Request) {
		forwarded, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusTeapot)
	}
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))
	ts, _ = f.rt.Tiers().Table().Lookup("ns/llama")
	body := chat("llama")
	resp, _ := f.mustPost(pathChatCompletions, body, nil)
	if handover != nil {
		defer handover.Cancel()
	}
	if resp.StatusCode != http.StatusTeapot || string(forwarded) != body {
		t.Fatalf("got %d, forwarded %q; want the successor's answer and the body %q", resp.StatusCode, forwarded, body)
	}
	if gpu1.requests.Load() != 0 || f.ready.RecheckCalls("ns/llama", "gpu0") != 1 {
		t.Fatalf("gpu1 saw %d requests, gpu0 rechecked %d times; want 0 and 1", gpu1.requests.Load(),
			f.ready.RecheckCalls("ns/llama", "gpu0"))
	}
	f.assertIdle("ns/llama")
	checkBodiesReleased(t, f)
}

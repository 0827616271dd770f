package router

import (
	"net/http"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestPassiveEjection proves a member that resets a fresh connection, or
// closes it, after taking the request and before any response byte costs
// one request: that request gets its one attempt (502, no second member),
// Recheck is called once for the member, and with readiness honouring it
// the following requests go to the other member without a failure. A
// member that refuses the connection costs none: TestNotSentReadmitted.
func TestPassiveEjection(t *testing.T) {
	const following = 20
	tests := []struct {
		desc      string
		closes    bool // the member closes the connection instead of resetting it.
		wantEject Ejection
	}{
		{desc: "reset before any response byte", wantEject: EjectReset},
		{desc: "closed after taking the request", closes: true, wantEject: EjectClosed},
	}
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		for _, tt := range tests {
			t.Run(string(strategy)+"/"+tt.desc, func(t *testing.T) {
				f := newFixture(t, fixtureOptions{})
				gpu0, gpu1 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
				gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
					if tt.closes {
						closeConnection(w)
						return
					}
					resetConnection(w)
				})
				f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
					[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))

				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
					t.Fatalf("first request: %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
				}
				o := f.outcome()
				if o.Member != "gpu0" || o.End != EndUnavailable || o.Ejection != tt.wantEject {
					t.Fatalf("outcome %+v, want gpu0 upstream_unavailable ejected %s", o, tt.wantEject)
				}
				if rec := o.Evidence(); string(rec.Ejection) != string(tt.wantEject) {
					t.Fatalf("decision record ejection %q, want %q", rec.Ejection, tt.wantEject)
				}
				if n := f.ready.RecheckCalls("ns/llama", "gpu0"); n != 1 {
					t.Fatalf("Recheck(ns/llama, gpu0) called %d times, want 1", n)
				}
				if gpu1.requests.Load() != 0 {
					t.Fatal("the failed request reached a second member")
				}
				for i := range following {
					resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil)
					if resp.StatusCode != http.StatusOK || resp.Header.Get(headerMember) != "gpu1" {
						t.Fatalf("request %d after the ejection: %d from %q, want 200 from gpu1", i, resp.StatusCode, resp.Header.Get(headerMember))
					}
					if o := f.outcome(); o.Ejection != "" {
						t.Fatalf("outcome %+v, want no ejection", o)
					}
				}
				if n := f.ready.RecheckCalls("ns/llama", "gpu0"); n != 1 {
					t.Fatalf("Recheck called %d times in all, want 1", n)
				}
				if got := gpu0.requests.Load(); got != 1 {
					t.Fatalf("gpu0 saw %d requests, want the one it reset", got)
				}
				f.assertIdle("ns/llama")
			})
		}
	}
}

package router

import (
	"io"
	"net/http"
	"testing"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestHandedOverRequestGoesToSuccessor hands a tier's admission over while
// a request is on its way: the request that reaches admission afterwards is
// given to Options.HandedOver with its body readable again, reserving
// nothing and reaching no member; without the option it is refused as a
// quiesced tier.
func TestHandedOverRequestGoesToSuccessor(t *testing.T) {
	for _, withHook := range []bool{true, false} {
		t.Run(map[bool]string{true: "forwarded", false: "refused"}[withHook], func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			gpu0 := newUpstream(t, "gpu0", nil)
			var forwarded []byte
			if withHook {
				f.rt.handedOver = func(w http.ResponseWriter, r *http.Request) {
					forwarded, _ = io.ReadAll(r.Body)
					if r.ContentLength != int64(len(forwarded)) {
						t.Errorf("ContentLength %d for a %d-byte body", r.ContentLength, len(forwarded))
					}
					w.WriteHeader(http.StatusTeapot)
				}
			}
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}}))
			ts, _ := f.rt.Tiers().Table().Lookup("ns/llama")
			h, _, err := ts.Admission().HandOver(make(chan struct{}, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Cancel()

			body := chat("llama")
			resp, got := f.mustPost(pathChatCompletions, body, nil)
			switch {
			case withHook && (resp.StatusCode != http.StatusTeapot || string(forwarded) != body):
				t.Fatalf("got %d, forwarded %q; want the hook's answer and the body %q", resp.StatusCode, forwarded, body)
			case !withHook && (resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, got) != "tier_quiesced"):
				t.Fatalf("got %d %s, want 503 tier_quiesced", resp.StatusCode, got)
			}
			if n := gpu0.requests.Load(); n != 0 {
				t.Fatalf("the member received %d requests", n)
			}
			if n := f.totalReleases(); n != 0 {
				t.Fatalf("%d releases: a lease was taken", n)
			}
		})
	}
}

package router

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// admissionInputs builds the inputs the router would for ts, every member
// ready and pressure unknown.
func admissionInputs(ts *tiers.Tier) admission.Inputs {
	in := admission.Inputs{Ready: map[string]bool{}}
	for _, id := range ts.Config().IDs() {
		in.Ready[id] = true
	}
	return in
}

// TestRefusals proves every admission refusal is a 503 with Retry-After: 1
// and its code, with no member reached and no lease left.
func TestRefusals(t *testing.T) {
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			tests := []struct {
				desc     string
				mutate   func(*v1alpha1.ReplicaTierSpec)
				notReady bool
				hold     bool // one request holds the only slot first.
				wantCode string
			}{
				{desc: "capacity exhausted", mutate: tierMax(1), hold: true, wantCode: "capacity_exhausted"},
				{desc: "tier quiesced", mutate: func(s *v1alpha1.ReplicaTierSpec) {
					s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "maintenance"}
				}, wantCode: "tier_quiesced"},
				{desc: "every member quiesced", mutate: func(s *v1alpha1.ReplicaTierSpec) {
					s.Quiesce = &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu0": "a", "gpu1": "b"}}
				}, wantCode: "no_eligible_member"},
				{desc: "no member ready", notReady: true, wantCode: "no_eligible_member"},
			}
			for _, tt := range tests {
				t.Run(tt.desc, func(t *testing.T) {
					f := newFixture(t, fixtureOptions{})
					pool := &upstreamPool{}
					gpu0, gpu1 := newUpstream(t, "gpu0", pool), newUpstream(t, "gpu1", pool)
					release := make(chan struct{})
					gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
						<-release
						_, _ = io.WriteString(w, "{}")
					})
					mutate := []func(*v1alpha1.ReplicaTierSpec){}
					if tt.mutate != nil {
						mutate = append(mutate, tt.mutate)
					}
					f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
						[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}, mutate...))
					if tt.notReady {
						f.ready.Set("ns/llama", map[string]bool{"gpu0": false, "gpu1": false})
					}
					held := make(chan error, 1)
					if tt.hold {
						go func() {
							resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
							if err == nil {
								_, _ = io.Copy(io.Discard, resp.Body)
								_ = resp.Body.Close()
							}
							held <- err
						}()
						gpu0.waitArrival(t)
					}

					resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
					if resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, body) != tt.wantCode ||
						resp.Header.Get("Retry-After") != "1" || resp.Header.Get(headerTier) != "ns/llama" ||
						resp.Header.Get(headerMember) != "" {
						t.Fatalf("got %d %s %v, want 503 %s with Retry-After: 1", resp.StatusCode, body, resp.Header, tt.wantCode)
					}
					o := f.outcome()
					if o.Result != ResultNotAdmitted || o.Code != tt.wantCode || o.Selection != nil || o.Member != "" {
						t.Errorf("outcome = %+v", o)
					}
					wantRequests := int64(0)
					if tt.hold {
						wantRequests = 1
						close(release)
						if err := <-held; err != nil {
							t.Fatal(err)
						}
						f.outcome()
					}
					if got := gpu0.requests.Load() + gpu1.requests.Load(); got != wantRequests {
						t.Errorf("upstream requests = %d, want %d", got, wantRequests)
					}
					f.assertIdle("ns/llama")
				})
			}
		})
	}
}

// TestConcurrentCeilings sends 20 concurrent requests and checks at the
// members that no member ceiling and no tier ceiling was ever exceeded.
func TestConcurrentCeilings(t *testing.T) {
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			pool := &upstreamPool{}
			gpu0, gpu1 := newUpstream(t, "gpu0", pool), newUpstream(t, "gpu1", pool)
			release := make(chan struct{})
			arrived := make(chan struct{}, 20)
			hold := func(w http.ResponseWriter, _ *http.Request) {
				arrived <- struct{}{}
				<-release
				_, _ = io.WriteString(w, "{}")
			}
			gpu0.handle(hold)
			gpu1.handle(hold)
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 3}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}, tierMax(4)))

			const n = 20
			statuses := make(chan int, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					<-start
					resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
					if err != nil {
						t.Error(err)
						statuses <- 0
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					statuses <- resp.StatusCode
				})
			}
			close(start)
			// Exactly four fit: the refusals answer at once, the four wait.
			refused := 0
			for refused < n-4 {
				if s := <-statuses; s != http.StatusServiceUnavailable {
					t.Fatalf("status %d before the held requests were released, want 503", s)
				}
				refused++
			}
			for range 4 {
				<-arrived
			}
			close(release)
			wg.Wait()
			close(statuses)
			for s := range statuses {
				if s != http.StatusOK {
					t.Errorf("held request status %d, want 200", s)
				}
			}
			for range n {
				f.outcome()
			}
			if gpu0.high.Load() > 3 || gpu1.high.Load() > 2 || pool.high.Load() > 4 {
				t.Errorf("high-water marks: gpu0 %d (max 3), gpu1 %d (max 2), tier %d (max 4)", gpu0.high.Load(), gpu1.high.Load(), pool.high.Load())
			}
			if pool.high.Load() != 4 || gpu0.requests.Load()+gpu1.requests.Load() != 4 {
				t.Errorf("tier high-water %d, requests %d; want 4 and 4", pool.high.Load(), gpu0.requests.Load()+gpu1.requests.Load())
			}
			if f.totalReleases() != 4 {
				t.Errorf("release calls = %d, want 4", f.totalReleases())
			}
			f.assertIdle("ns/llama")
		})
	}
}

// held is one request held open at a member.
type held struct {
	member string
	done   chan error
}

// holdOrAnswer answers at once, or, for requests with X-Hold, sends the
// response headers and holds the body until release is closed.
func holdOrAnswer(release chan struct{}) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		}
		_, _ = io.WriteString(w, "{}")
	}
}

// TestDecisiveCases runs the scheduling contract's decisive cases end to end
// with injected pressure, reading the choice off X-Sluice-Member.
func TestDecisiveCases(t *testing.T) {
	setup := func(t *testing.T) (*fixture, chan struct{}) {
		f := newFixture(t, fixtureOptions{})
		release := make(chan struct{})
		ups := map[string]*fakeMember{}
		for _, id := range []string{"gpu0", "gpu1"} {
			ups[id] = newUpstream(t, id, nil)
			ups[id].handle(holdOrAnswer(release))
		}
		f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: ups["gpu0"].srv.URL, Max: 2}, {ID: "gpu1", Endpoint: ups["gpu1"].srv.URL, Max: 2}}))
		return f, release
	}
	// send makes one request and returns the member it went to; hold keeps
	// it open at the member until release is closed.
	send := func(t *testing.T, f *fixture, hold bool) held {
		t.Helper()
		h := held{done: make(chan error, 1)}
		header := http.Header{}
		if hold {
			header.Set("X-Hold", "1")
		}
		resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), header) //nolint:bodyclose // Closed by the goroutine below.
		if err != nil {
			t.Fatal(err)
		}
		h.member = resp.Header.Get(headerMember)
		go func() {
			_, err := io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			h.done <- err
		}()
		if !hold {
			if err := <-h.done; err != nil {
				t.Fatal(err)
			}
			if o := f.outcome(); o.Selection == nil || o.Selection.SelectedMemberID != h.member {
				t.Fatalf("selection %+v disagrees with member %s", o.Selection, h.member)
			}
		}
		return h
	}
	finish := func(t *testing.T, f *fixture, release chan struct{}, holds ...held) {
		t.Helper()
		close(release)
		for _, h := range holds {
			if err := <-h.done; err != nil {
				t.Fatal(err)
			}
			f.outcome()
		}
		f.assertIdle("ns/llama")
	}
	unknown := scheduler.UnknownPressure()

	t.Run("unknown 0/2 beats fresh 1/2", func(t *testing.T) {
		f, release := setup(t)
		// Fresh 0 ppm on gpu1 against high pressure on gpu0 puts one request
		// on gpu1.
		f.pressure.Set("ns/llama", map[string]scheduler.Pressure{"gpu0": tierstest.Fresh(900_000), "gpu1": tierstest.Fresh(0)})
		first := send(t, f, true)
		if first.member != "gpu1" {
			t.Fatalf("first request went to %s, want gpu1", first.member)
		}
		f.pressure.Set("ns/llama", map[string]scheduler.Pressure{"gpu0": unknown, "gpu1": tierstest.Fresh(0)})
		if got := send(t, f, false); got.member != "gpu0" {
			t.Fatalf("unknown 0/2 against fresh 1/2 went to %s, want gpu0", got.member)
		}
		finish(t, f, release, first)
	})

	t.Run("fresh 0 ppm beats unknown at equal load", func(t *testing.T) {
		f, release := setup(t)
		// The cursor favors gpu0; only pressure can pick gpu1.
		f.pressure.Set("ns/llama", map[string]scheduler.Pressure{"gpu0": unknown, "gpu1": tierstest.Fresh(0)})
		if got := send(t, f, false); got.member != "gpu1" {
			t.Fatalf("went to %s, want gpu1", got.member)
		}
		// The cursor now favors gpu0 again; swap the pressures and gpu0 wins
		// for the right reason only if the next one goes to gpu0 as well.
		f.pressure.Set("ns/llama", map[string]scheduler.Pressure{"gpu0": tierstest.Fresh(0), "gpu1": unknown})
		if got := send(t, f, false); got.member != "gpu0" {
			t.Fatalf("went to %s, want gpu0", got.member)
		}
		if got := send(t, f, false); got.member != "gpu0" { // cursor on gpu1 now.
			t.Fatalf("with the cursor on gpu1 went to %s, want gpu0", got.member)
		}
		finish(t, f, release)
	})

	t.Run("(0/2, 1/2) picks the first, then rotation", func(t *testing.T) {
		f, release := setup(t)
		// All pressure unknown. Warm up: gpu0 (cursor → gpu1), then a held
		// request on gpu1 (cursor → gpu0), then gpu0 (cursor → gpu1).
		if got := send(t, f, false); got.member != "gpu0" {
			t.Fatalf("warm-up went to %s", got.member)
		}
		loaded := send(t, f, true)
		if loaded.member != "gpu1" {
			t.Fatalf("loader went to %s", loaded.member)
		}
		if got := send(t, f, false); got.member != "gpu0" {
			t.Fatalf("(0/2, 1/2) with the cursor on gpu0 went to %s", got.member)
		}
		// (0/2, 1/2) with the cursor on gpu1: local load picks gpu0.
		first := send(t, f, true)
		if first.member != "gpu0" {
			t.Fatalf("(0/2, 1/2) with the cursor on gpu1 went to %s, want gpu0", first.member)
		}
		// (1/2, 1/2): rotation from the member after the winner.
		if got := send(t, f, false); got.member != "gpu1" {
			t.Fatalf("tie went to %s, want gpu1 by rotation", got.member)
		}
		if got := send(t, f, false); got.member != "gpu0" {
			t.Fatalf("tie went to %s, want gpu0 by rotation", got.member)
		}
		finish(t, f, release, loaded, first)
	})
}

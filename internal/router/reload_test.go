package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/source"
)

// filesHarness runs a files source on a fake clock into a fixture, as
// cmd/router wires it.
type filesHarness struct {
	t       *testing.T
	f       *fixture
	dir     string
	clock   *clocktesting.FakeClock
	applied chan source.Snapshot
}

func newFilesHarness(t *testing.T, f *fixture, manifest string) *filesHarness {
	t.Helper()
	h := &filesHarness{t: t, f: f, dir: t.TempDir(), clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		applied: make(chan source.Snapshot, 8)}
	h.write(manifest)
	src, err := source.NewFiles(source.FilesOptions{Dir: h.dir, NodeName: "gpu-node-1", Clock: h.clock, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, func(s source.Snapshot) {
			f.ready.Reconfigure(tiers.ReadinessTiers(s))
			f.rt.Tiers().Apply(s)
			h.applied <- s
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("source Run = %v", err)
		}
	})
	h.wait()
	return h
}

func (h *filesHarness) write(manifest string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "tiers.yaml"), []byte(manifest), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func (h *filesHarness) wait() source.Snapshot {
	h.t.Helper()
	select {
	case s := <-h.applied:
		return s
	case <-time.After(failSafe):
		h.t.Fatal("no snapshot applied")
	}
	return source.Snapshot{}
}

// reload writes the manifest, ticks the source and waits for the router to
// apply it.
func (h *filesHarness) reload(manifest string) source.Snapshot {
	h.t.Helper()
	h.write(manifest)
	h.clock.Step(time.Second)
	return h.wait()
}

// manifestMember is one member line of a manifest.
type manifestMember struct {
	id       string
	endpoint string
	max      int
}

// manifest renders the ns/llama tier.
func manifest(strategy v1alpha1.Strategy, members []manifestMember, quiesced ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: sluice.dev/v1alpha1\nkind: ReplicaTier\nmetadata: {name: llama, namespace: ns}\nspec:\n")
	b.WriteString("  nodeName: gpu-node-1\n  aliases: [llama]\n  servedModel: m\n")
	if strategy != "" {
		fmt.Fprintf(&b, "  strategy: %s\n", strategy)
	}
	b.WriteString("  members:\n")
	for _, m := range members {
		fmt.Fprintf(&b, "  - {id: %s, endpoint: %q, maxConcurrency: %d}\n", m.id, m.endpoint, m.max)
	}
	if len(quiesced) > 0 {
		b.WriteString("  quiesce:\n    members:\n")
		for _, id := range quiesced {
			fmt.Fprintf(&b, "      %s: maintenance\n", id)
		}
	}
	return b.String()
}

// stream is a held SSE request: its first event has arrived.
type stream struct {
	resp   *http.Response
	member string
}

// openStream starts a held stream and reads its first event.
func openStream(t *testing.T, f *fixture) *stream {
	t.Helper()
	resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), http.Header{"X-Hold": {"1"}}) //nolint:bodyclose // finishStream closes it.
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len(sseEvents[0]))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != sseEvents[0] {
		t.Fatalf("first event %q, %v", first, err)
	}
	return &stream{resp: resp, member: resp.Header.Get(headerMember)}
}

// finishStream reads the rest of a released stream and checks it is whole.
func finishStream(t *testing.T, f *fixture, s *stream) {
	t.Helper()
	rest, err := io.ReadAll(s.resp.Body)
	_ = s.resp.Body.Close()
	if err != nil || sseEvents[0]+string(rest) != strings.Join(sseEvents, "") {
		t.Fatalf("stream on %s was disturbed: %q, %v", s.member, rest, err)
	}
	if o := f.outcome(); o.End != EndComplete || o.Member != s.member {
		t.Fatalf("outcome = %+v", o)
	}
}

// heldStreams answers quick requests at once and holds X-Hold streams after
// their first event until finish is closed.
func heldStreams(finish chan struct{}) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") == "" {
			_, _ = io.WriteString(w, "{}")
			return
		}
		sseHeaders(w)
		writeEvents(w, sseEvents[0])
		<-finish
		writeEvents(w, sseEvents[1:]...)
	}
}

// quick sends a request answered at once and returns its member.
func quick(t *testing.T, f *fixture) string {
	t.Helper()
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("quick request: %d %s", resp.StatusCode, body)
	}
	f.outcome()
	return resp.Header.Get(headerMember)
}

// capacityOf reads one tier's capacity from the admin API.
func capacityOf(t *testing.T, f *fixture, key string) adminapi.TierCapacity {
	t.Helper()
	status, body := f.adminGet("/admin/v1/capacity", nil)
	if status != http.StatusOK {
		t.Fatalf("capacity = %d", status)
	}
	var view adminapi.CapacityView
	if err := json.Unmarshal(body, &view); err != nil {
		t.Fatal(err)
	}
	for _, tc := range view.Tiers {
		if tc.Tier == key {
			sum := 0
			for _, m := range tc.Members {
				sum += m.Active
			}
			if sum != tc.Active {
				t.Fatalf("tier active %d != member sum %d", tc.Active, sum)
			}
			return tc
		}
	}
	t.Fatalf("tier %s not in %s", key, body)
	return adminapi.TierCapacity{}
}

// memberOf returns one member of a tier's capacity, or nil.
func memberOf(tc adminapi.TierCapacity, id string) *adminapi.MemberCapacity {
	for i := range tc.Members {
		if tc.Members[i].ID == id {
			return &tc.Members[i]
		}
	}
	return nil
}

// TestHotReloadDuringStreams changes a tier under two in-flight streams
// through the files source: lowering and raising ceilings, removing,
// adding and quiescing members. No stream is disturbed, counts reconcile,
// and removed or quiesced members get no new requests.
func TestHotReloadDuringStreams(t *testing.T) {
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			finish0, finish1 := make(chan struct{}), make(chan struct{})
			gpu0, gpu1, gpu2 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil), newUpstream(t, "gpu2", nil)
			gpu0.handle(heldStreams(finish0))
			gpu1.handle(heldStreams(finish1))
			gpu2.handle(heldStreams(nil))
			m0 := manifestMember{"gpu0", gpu0.srv.URL, 2}
			m1 := manifestMember{"gpu1", gpu1.srv.URL, 2}
			m2 := manifestMember{"gpu2", gpu2.srv.URL, 2}
			h := newFilesHarness(t, f, manifest(strategy, []manifestMember{m0, m1}))

			a := openStream(t, f)
			b := openStream(t, f)
			if a.member != "gpu0" || b.member != "gpu1" {
				t.Fatalf("streams on %s and %s, want gpu0 and gpu1", a.member, b.member)
			}

			// Lower gpu0's ceiling to its count and raise gpu1's.
			m0.max, m1.max = 1, 3
			h.reload(manifest(strategy, []manifestMember{m0, m1}))
			for range 3 {
				if got := quick(t, f); got != "gpu1" {
					t.Fatalf("with gpu0 full at its lowered ceiling a request went to %s", got)
				}
			}
			tc := capacityOf(t, f, "ns/llama")
			if g0 := memberOf(tc, "gpu0"); g0.Active != 1 || *g0.MaxConcurrency != 1 || *memberOf(tc, "gpu1").MaxConcurrency != 3 || tc.Active != 2 {
				t.Fatalf("after the ceiling change: %+v", tc)
			}

			// Remove gpu0 (its stream continues) and add gpu2.
			h.reload(manifest(strategy, []manifestMember{m1, m2}))
			gpu0Requests := gpu0.requests.Load()
			sawGPU2 := false
			for range 4 {
				switch got := quick(t, f); got {
				case "gpu2":
					sawGPU2 = true
				case "gpu1":
				default:
					t.Fatalf("a request went to %s after gpu0 was removed", got)
				}
			}
			if !sawGPU2 || gpu0.requests.Load() != gpu0Requests {
				t.Fatalf("gpu2 used %v, gpu0 requests %d → %d", sawGPU2, gpu0Requests, gpu0.requests.Load())
			}
			tc = capacityOf(t, f, "ns/llama")
			if g0 := memberOf(tc, "gpu0"); g0 == nil || g0.State != "removed" || g0.Active != 1 || g0.Phase != "Draining" {
				t.Fatalf("the removed member with a stream: %+v", g0)
			}

			// Quiesce gpu1 (its stream continues); only gpu2 admits.
			h.reload(manifest(strategy, []manifestMember{m1, m2}, "gpu1"))
			for range 3 {
				if got := quick(t, f); got != "gpu2" {
					t.Fatalf("a request went to quiesced %s", got)
				}
			}
			drained := make(chan int, 1)
			go func() {
				status, _ := f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/llama/drain?member=gpu1&timeout=1m", nil)
				drained <- status
			}()

			// The streams finish whole; the removed member's lease released
			// into it, and it leaves the view.
			close(finish0)
			finishStream(t, f, a)
			if g0 := memberOf(capacityOf(t, f, "ns/llama"), "gpu0"); g0 != nil {
				t.Fatalf("the removed member is still reported after its last lease: %+v", g0)
			}
			close(finish1)
			finishStream(t, f, b)
			if status := <-drained; status != http.StatusOK {
				t.Fatalf("drain of gpu1 = %d, want 200", status)
			}
			if f.releaseCalls("ns/llama", "gpu0") != 1 {
				t.Fatalf("gpu0 release calls = %d, want 1", f.releaseCalls("ns/llama", "gpu0"))
			}
			f.assertIdle("ns/llama")

			// Raise the ceiling of gpu2, readmit gpu1: both admit again.
			m2.max = 5
			h.reload(manifest(strategy, []manifestMember{m1, m2}))
			if n := f.ready.RecheckCalls("ns/llama", "gpu1"); n != 1 {
				t.Fatalf("readmitting gpu1 rechecked it %d times, want 1", n)
			}
			f.ready.Pass("ns/llama", "gpu1") // its probe after the readmission.
			seen := map[string]bool{}
			for range 4 {
				seen[quick(t, f)] = true
			}
			if !seen["gpu1"] || !seen["gpu2"] || *memberOf(capacityOf(t, f, "ns/llama"), "gpu2").MaxConcurrency != 5 {
				t.Fatalf("after readmission requests went to %v", seen)
			}

			// An invalid edit keeps the last good configuration and is
			// reported on the admin API.
			s := h.reload(strings.Replace(manifest(strategy, []manifestMember{m1, m2}), "maxConcurrency: 5", "maxConcurrency: 0", 1))
			if len(s.Errors) != 1 {
				t.Fatalf("errors = %+v", s.Errors)
			}
			status, body := f.adminGet("/admin/v1/tiers", nil)
			if status != http.StatusOK || !strings.Contains(string(body), `"file": "tiers.yaml"`) ||
				!strings.Contains(string(body), "spec.members[1].maxConcurrency") {
				t.Fatalf("tiers view does not report the file: %s", body)
			}
			if *memberOf(capacityOf(t, f, "ns/llama"), "gpu2").MaxConcurrency != 5 || quick(t, f) == "" {
				t.Fatal("the last good configuration was not kept")
			}
			f.assertIdle("ns/llama")
		})
	}
}

// TestRemovedTierKeepsLeases removes a whole tier under a stream: the stream
// finishes, the tier stops admitting at once, stays visible while it holds
// the lease and can be drained.
func TestRemovedTierKeepsLeases(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	finish := make(chan struct{})
	up := newUpstream(t, "gpu0", nil)
	up.handle(heldStreams(finish))
	tier := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 2}})
	f.apply(tier)
	s := openStream(t, f)
	f.apply() // the tier is gone.

	resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusNotFound || apierrortest.Code(t, body) != "model_not_found" {
		t.Fatalf("removed tier answered %d %s", resp.StatusCode, body)
	}
	f.outcome()
	tc := capacityOf(t, f, "ns/llama")
	if !tc.Removed || tc.Active != 1 || tc.State != "quiesced" {
		t.Fatalf("removed tier = %+v", tc)
	}
	drained := make(chan int, 1)
	go func() {
		status, _ := f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/llama/drain?timeout=1m", nil)
		drained <- status
	}()
	close(finish)
	finishStream(t, f, s)
	if status := <-drained; status != http.StatusOK {
		t.Fatalf("drain = %d", status)
	}
	f.apply(tier) // back, with fresh counts and the old lease accounted for.
	f.assertIdle("ns/llama")
	f.ready.Pass("ns/llama", "gpu0") // readmitted: its probe after the readmission.
	if got := quick(t, f); got != "gpu0" {
		t.Fatalf("re-added tier routed to %q", got)
	}
}

// TestApplyErrors proves a tier the router cannot apply is reported and,
// when it was served before, keeps its previous configuration.
func TestApplyErrors(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	good := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 2}})
	broken := sourcetest.Tier("ns/llama", []string{"llama", "other"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "ftp://nowhere", Max: 2}})
	fresh := sourcetest.Tier("ns/new", []string{"new"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "::", Max: 2}})
	f.apply(good)
	applied := f.apply(broken, fresh)
	if applied.Served != 1 || len(applied.Refused) != 2 || applied.Refused[0].Key != "ns/llama" || applied.Refused[1].Key != "ns/new" {
		t.Fatalf("Apply = %+v, want ns/llama served on its previous configuration, ns/llama and ns/new refused", applied)
	}
	for _, r := range applied.Refused {
		if r.Message == "" || strings.Contains(r.Message, "ftp://") {
			t.Errorf("refusal of %s says %q", r.Key, r.Message)
		}
	}
	if got := quick(t, f); got != "gpu0" {
		t.Fatalf("the previous configuration is not served: %q", got)
	}
	if resp, _ := f.mustPost(pathChatCompletions, chat("other"), nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the unapplied alias is served: %d", resp.StatusCode)
	}
	f.outcome()
	status, body := f.adminGet("/admin/v1/tiers", nil)
	var view adminapi.TiersView
	if err := json.Unmarshal(body, &view); status != http.StatusOK || err != nil || len(view.Tiers) != 2 {
		t.Fatalf("tiers = %d %s", status, body)
	}
	for _, v := range view.Tiers {
		if v.ApplyError == "" || strings.Contains(v.ApplyError, "ftp://") {
			t.Errorf("tier %s apply error %q", v.Tier, v.ApplyError)
		}
	}
}

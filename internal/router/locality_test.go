package router

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// sameHostRule is the rule a refused member's message names.
const sameHostRule = "endpoint host is not loopback or an address of this node (spec.memberLocality: SameHost)"

// TestMemberLocality proves a SameHost tier is applied only when every
// member is loopback or on a node address: a new tier with a remote member
// is not served, an update adding one keeps the previous generation in
// force, and Applied and the admin tiers view say why without the
// endpoint; Any serves the remote member; fixing the tier clears the
// error; a refused generation is logged once.
func TestMemberLocality(t *testing.T) {
	src := &tierstest.HostAddrs{}
	src.Set(nil, "192.0.2.10", "2001:db8::10")
	f := newFixture(t, fixtureOptions{hostAddrs: src.Read})
	up := newUpstream(t, "gpu0", nil)
	const remote = "http://192.0.2.99:8000"

	loopback := sourcetest.Tier("ns/loopback", []string{"loop"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{
		{ID: "v4", Endpoint: "http://127.0.0.2:8000"}, {ID: "v6", Endpoint: "http://[::1]:8000"}, {ID: "name", Endpoint: "http://localhost:8000"},
		{ID: "mapped", Endpoint: "http://[::ffff:127.0.0.1]:8000"}})
	node := sourcetest.Tier("ns/node", []string{"node"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{
		{ID: "v4", Endpoint: "http://192.0.2.10:8000"}, {ID: "v6", Endpoint: "http://[2001:db8::10]:8000"}})
	llama := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}})
	llama.Generation = 1
	stranger := sourcetest.Tier("ns/stranger", []string{"stranger"}, "", []sourcetest.Member{{ID: "gpu1", Endpoint: remote}})
	stranger.Generation = 1
	f.apply(loopback, node, llama, stranger)

	applied := map[string]adminapi.AppliedTier{}
	for _, a := range f.rt.Tiers().Applied() {
		applied[a.Key] = a
	}
	for _, key := range []string{"ns/loopback", "ns/node", "ns/llama"} {
		if a := applied[key]; a.ApplyError != "" || len(a.Members) == 0 {
			t.Errorf("%s = %+v, want applied", key, a)
		}
	}
	want := tiers.ErrInvalidTier.Error() + ": member gpu1: " + sameHostRule
	if a := applied["ns/stranger"]; a.ApplyError != want || a.Generation != 0 || a.FailedGeneration != 1 || len(a.Members) != 0 {
		t.Fatalf("ns/stranger = %+v, want refused with %q", a, want)
	}
	if resp, _ := f.mustPost(pathChatCompletions, chat("stranger"), nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the refused tier answered %d", resp.StatusCode)
	}
	f.outcome()
	if got := quick(t, f); got != "gpu0" {
		t.Fatalf("llama routed to %q", got)
	}

	// An update introducing a remote member: generation 1 keeps serving.
	update := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}, {ID: "gpu1", Endpoint: remote}})
	update.Generation = 2
	f.apply(loopback, node, update, stranger)
	f.apply(loopback, node, update, stranger) // the same generations again: nothing new to log.
	l := appliedTier(t, f, "ns/llama")
	if l.Generation != 1 || strings.Join(l.Members, ",") != "gpu0" || l.FailedGeneration != 2 || l.ApplyError != want {
		t.Fatalf("ns/llama after a remote member = %+v", l)
	}
	if got := quick(t, f); got != "gpu0" {
		t.Fatalf("llama routed to %q", got)
	}
	status, body := f.adminGet("/admin/v1/tiers", nil)
	var view adminapi.TiersView
	if err := json.Unmarshal(body, &view); status != http.StatusOK || err != nil {
		t.Fatalf("tiers = %d %s", status, body)
	}
	for _, v := range view.Tiers {
		switch v.Tier {
		case "ns/llama", "ns/stranger":
			if v.ApplyError != want {
				t.Errorf("tier view %s apply error %q, want %q", v.Tier, v.ApplyError, want)
			}
		default:
			if v.ApplyError != "" {
				t.Errorf("tier view %s apply error %q", v.Tier, v.ApplyError)
			}
		}
	}
	logs := f.logs.String()
	for _, text := range []string{string(body), logs} {
		if strings.Contains(text, "192.0.2.99") {
			t.Fatalf("an endpoint leaked: %s", text)
		}
	}
	if n := countLines(logs, "tier not applied", `"tier":"ns/llama"`); n != 1 {
		t.Fatalf("generation 2 of ns/llama logged %d times, want once:\n%s", n, logs)
	}
	if n := countLines(logs, "tier not applied", `"tier":"ns/stranger"`); n != 1 {
		t.Fatalf("generation 1 of ns/stranger logged %d times, want once:\n%s", n, logs)
	}

	// Any serves the remote member; a fixed tier clears its error.
	update.Generation = 3
	update.Spec.MemberLocality = v1alpha1.MemberLocalityAny
	stranger.Generation = 2
	stranger.Spec.Members[0].Endpoint = "http://127.0.0.1:8000"
	f.apply(loopback, node, update, stranger)
	if l := appliedTier(t, f, "ns/llama"); l.Generation != 3 || strings.Join(l.Members, ",") != "gpu0,gpu1" || l.ApplyError != "" {
		t.Fatalf("ns/llama with memberLocality Any = %+v", l)
	}
	if s := appliedTier(t, f, "ns/stranger"); s.Generation != 2 || s.ApplyError != "" || s.FailedGeneration != 0 {
		t.Fatalf("ns/stranger fixed = %+v", s)
	}

	// A later refused generation is logged again.
	update.Generation = 4
	update.Spec.MemberLocality = v1alpha1.MemberLocalitySameHost
	f.apply(loopback, node, update, stranger)
	if n := countLines(f.logs.String(), "tier not applied", `"tier":"ns/llama"`); n != 2 {
		t.Fatalf("ns/llama refusals logged %d times, want twice", n)
	}
	if l := appliedTier(t, f, "ns/llama"); l.Generation != 3 || l.FailedGeneration != 4 {
		t.Fatalf("ns/llama after SameHost again = %+v", l)
	}
}

// TestMemberLocalityAddressSource proves the host's addresses are read once
// per Apply, only when a SameHost tier has a member that is not loopback,
// so an address the node gains counts at the next configuration change;
// and that a source that fails refuses such members with its own message,
// logged once without the source's error text, while loopback tiers serve.
func TestMemberLocalityAddressSource(t *testing.T) {
	src := &tierstest.HostAddrs{}
	src.Set(nil, "192.0.2.10")
	f := newFixture(t, fixtureOptions{hostAddrs: src.Read})
	local := sourcetest.Tier("ns/local", []string{"local"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:8000"}})
	anyTier := sourcetest.Tier("ns/any", []string{"any"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://192.0.2.77:8000"}},
		func(s *v1alpha1.ReplicaTierSpec) { s.MemberLocality = v1alpha1.MemberLocalityAny })
	f.apply(local, anyTier)
	if n := src.Reads(); n != 0 {
		t.Fatalf("loopback and Any tiers read the addresses %d times", n)
	}

	moved := sourcetest.Tier("ns/moved", []string{"moved"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://192.0.2.50:8000"}, {ID: "gpu1", Endpoint: "http://192.0.2.51:8000"}},
		func(s *v1alpha1.ReplicaTierSpec) { s.Strategy = v1alpha1.StrategyRoundRobin })
	f.apply(local, anyTier, moved)
	if n := src.Reads(); n != 1 {
		t.Fatalf("one Apply read the addresses %d times", n)
	}
	if m := appliedTier(t, f, "ns/moved"); m.ApplyError == "" || m.Generation != 0 {
		t.Fatalf("ns/moved before the node has its addresses = %+v", m)
	}
	src.Set(nil, "192.0.2.10", "192.0.2.50", "192.0.2.51")
	f.apply(local, anyTier, moved)
	if m := appliedTier(t, f, "ns/moved"); m.ApplyError != "" || len(m.Members) != 2 {
		t.Fatalf("ns/moved after the node gained its addresses = %+v", m)
	}

	const marker = "ADDR-SOURCE-SENTINEL"
	src.Set(errors.New(marker))
	f.apply(local, anyTier, moved)
	f.apply(local, anyTier, moved)
	m := appliedTier(t, f, "ns/moved")
	wantMsg := tiers.ErrInvalidTier.Error() + ": member gpu0: endpoint host is not loopback and this node's addresses could not be read (spec.memberLocality: SameHost)"
	if m.ApplyError != wantMsg || len(m.Members) != 2 {
		t.Fatalf("ns/moved with a failing source = %+v, want the previous configuration and %q", m, wantMsg)
	}
	for _, key := range []string{"ns/local", "ns/any"} {
		if a := appliedTier(t, f, key); a.ApplyError != "" {
			t.Fatalf("%s with a failing source = %+v", key, a)
		}
	}
	logs := f.logs.String()
	if strings.Contains(logs, marker) {
		t.Fatalf("the source's error text was logged:\n%s", logs)
	}
	if n := countLines(logs, "host addresses could not be read"); n != 1 {
		t.Fatalf("the failing source was logged %d times, want once", n)
	}
}

// appliedTier returns the tier key of Applied.
func appliedTier(t *testing.T, f *fixture, key string) adminapi.AppliedTier {
	t.Helper()
	for _, a := range f.rt.Tiers().Applied() {
		if a.Key == key {
			return a
		}
	}
	t.Fatalf("%s is not in Applied", key)
	return adminapi.AppliedTier{}
}

// countLines counts the lines of logs that contain every one of subs.
func countLines(logs string, subs ...string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// TestPlan proves Plan returns the configuration Apply would put in force
// without applying it: an accepted tier as given, a refused update as the
// configuration its tier keeps serving, a refused new tier not at all — so
// the probes registered from it never reach a refused endpoint.
func TestPlan(t *testing.T) {
	src := &tierstest.HostAddrs{}
	src.Set(nil, "192.0.2.10")
	f := newFixture(t, fixtureOptions{hostAddrs: src.Read})
	up := newUpstream(t, "gpu0", nil)
	const remote = "http://192.0.2.99:8000"
	llama := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}})
	f.apply(llama)

	moved := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: remote}})
	stranger := sourcetest.Tier("ns/stranger", []string{"stranger"}, "", []sourcetest.Member{{ID: "gpu1", Endpoint: remote}})
	node := sourcetest.Tier("ns/node", []string{"node"}, "", []sourcetest.Member{{ID: "v4", Endpoint: "http://192.0.2.10:8000"}})
	plan := f.rt.Tiers().Plan(sourcetest.Snapshot(moved, stranger, node))
	endpoints := map[string]string{}
	for _, tr := range plan.Tiers {
		for _, m := range tr.Spec.Members {
			endpoints[tr.Key+"/"+m.ID] = m.Endpoint
		}
	}
	want := map[string]string{"ns/llama/gpu0": up.srv.URL, "ns/node/v4": "http://192.0.2.10:8000"}
	if !maps.Equal(endpoints, want) {
		t.Fatalf("plan endpoints %v, want %v", endpoints, want)
	}
	if got := quick(t, f); got != "gpu0" {
		t.Fatalf("Plan changed what is served: llama routed to %q", got)
	}
	if a := appliedTier(t, f, "ns/llama"); a.FailedGeneration != 0 || a.ApplyError != "" {
		t.Fatalf("Plan recorded an apply failure: %+v", a)
	}
}

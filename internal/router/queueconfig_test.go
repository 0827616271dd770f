package router

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// withQueue sets the tier's spec.queue; perTenant zero leaves the tenant
// share absent.
func withQueue(maxRequests int32, maxWait time.Duration, perTenant int32) func(*v1alpha1.ReplicaTierSpec) {
	return func(s *v1alpha1.ReplicaTierSpec) {
		s.Queue = &v1alpha1.QueueSpec{MaxRequests: maxRequests, MaxWait: &metav1.Duration{Duration: maxWait}}
		if perTenant != 0 {
			s.Queue.MaxRequestsPerTenant = &perTenant
		}
	}
}

// TestQueueChangeReconfigures adds, changes and removes a tier's queue
// through the files source under an in-flight stream: each change is
// applied to the same admission owner (its lease count survives), never to
// a new one, and the tier is served throughout.
func TestQueueChangeReconfigures(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	finish := make(chan struct{})
	up := newUpstream(t, "gpu0", nil)
	up.handle(heldStreams(finish))
	base := manifest("", []manifestMember{{"gpu0", up.srv.URL, 4}})
	h := newFilesHarness(t, f, base)
	first, served := f.rt.Tiers().Table().Lookup("ns/llama")
	if !served {
		t.Fatal("the tier is not served")
	}
	s := openStream(t, f)

	for _, step := range []struct {
		desc  string
		queue string // the spec.queue line; empty removes it.
		want  *v1alpha1.QueueSpec
	}{
		{"add", "  queue: {maxRequests: 8, maxWait: 2s}\n", &v1alpha1.QueueSpec{MaxRequests: 8,
			MaxWait: &metav1.Duration{Duration: 2 * time.Second}}},
		{"change", "  queue: {maxRequests: 16, maxWait: 500ms, maxRequestsPerTenant: 4}\n", &v1alpha1.QueueSpec{MaxRequests: 16,
			MaxWait: &metav1.Duration{Duration: 500 * time.Millisecond}, MaxRequestsPerTenant: ptrTo[int32](4)}},
		{"remove", "", nil},
	} {
		snap := h.reload(base + step.queue)
		if len(snap.Errors) != 0 {
			t.Fatalf("%s: source errors %+v", step.desc, snap.Errors)
		}
		ts, served := f.rt.Tiers().Table().Lookup("ns/llama")
		switch {
		case !served:
			t.Fatalf("%s: the tier is not served", step.desc)
		case ts != first || ts.Admission() != first.Admission():
			t.Fatalf("%s: the queue change replaced the tier's admission owner", step.desc)
		case ts.Admission().Snapshot().Active != 1:
			t.Fatalf("%s: active = %d, want the stream's lease", step.desc, ts.Admission().Snapshot().Active)
		}
		if got := ts.Config().Source().Spec.Queue; !reflect.DeepEqual(got, step.want) {
			t.Fatalf("%s: applied queue = %+v, want %+v", step.desc, got, step.want)
		}
		for _, at := range f.rt.Tiers().Applied() {
			if at.ApplyError != "" {
				t.Fatalf("%s: apply error %q", step.desc, at.ApplyError)
			}
		}
	}
	close(finish)
	finishStream(t, f, s)
	f.assertIdle("ns/llama")
}

// TestQueueReachesAdmission proves the router hands spec.queue to the
// admission owner, which checks it: a queue outside the admission bounds
// (a snapshot that skipped validation) is an apply error, a new tier with
// it is not served, and a served tier keeps its previous configuration.
func TestQueueReachesAdmission(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	members := []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 2}}
	good := sourcetest.Tier("ns/llama", []string{"llama"}, "", members, withQueue(8, time.Second, 0))
	f.apply(good)
	first, _ := f.rt.Tiers().Table().Lookup("ns/llama")

	for _, tc := range []struct {
		desc  string
		queue func(*v1alpha1.ReplicaTierSpec)
	}{
		{"wait below the bound", withQueue(8, time.Millisecond, 0)},
		{"no room", withQueue(0, time.Second, 0)},
		{"tenant share above the queue", withQueue(8, time.Second, 9)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bad := sourcetest.Tier("ns/llama", []string{"llama"}, "", members, tc.queue)
			fresh := sourcetest.Tier("ns/new", []string{"new"}, "", members, tc.queue)
			f.apply(bad, fresh)
			applied := map[string]string{}
			for _, at := range f.rt.Tiers().Applied() {
				applied[at.Key] = at.ApplyError
			}
			for _, key := range []string{"ns/llama", "ns/new"} {
				if !strings.Contains(applied[key], "queue") {
					t.Errorf("tier %s: apply error %q, want one naming the queue", key, applied[key])
				}
			}
			if _, served := f.rt.Tiers().Table().Lookup("ns/new"); served {
				t.Error("a new tier with an invalid queue is served")
			}
			ts, served := f.rt.Tiers().Table().Lookup("ns/llama")
			if !served || ts != first || !reflect.DeepEqual(ts.Config().Source().Spec.Queue, good.Spec.Queue) {
				t.Error("the served tier did not keep its previous configuration")
			}
			if got := quick(t, f); got != "gpu0" {
				t.Errorf("the previous configuration is not served: %q", got)
			}
		})
	}
}

// ptrTo returns a pointer to v.
func ptrTo[T any](v T) *T { return &v }

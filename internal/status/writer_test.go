package status

import (
	"context"
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

func TestApplyObjectHoldsOnlyRouterFields(t *testing.T) {
	u := applyObject("gpu-node-1", Report{Namespace: "ns", Name: "llama", AppliedGeneration: 7, Members: []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting},
		{ID: "gpu1", Ready: false, Phase: v1alpha1.MemberDrained},
	}})
	want := map[string]any{
		"apiVersion": "sluice.dev/v1alpha1",
		"kind":       "ReplicaTier",
		"metadata":   map[string]any{"name": "llama", "namespace": "ns"},
		"status": map[string]any{
			"router": map[string]any{"node": "gpu-node-1", "appliedGeneration": int64(7)},
			"members": []any{
				map[string]any{"id": "gpu0", "ready": true, "phase": "Admitting"},
				map[string]any{"id": "gpu1", "ready": false, "phase": "Drained"},
			},
		},
	}
	if !reflect.DeepEqual(u.Object, want) {
		t.Fatalf("apply object = %#v, want %#v", u.Object, want)
	}
	// It must survive a deep copy (JSON-compatible values only).
	_ = u.DeepCopy()
}

// TestApplyObjectApplyError proves a report's apply error is written under
// status.router, and that a report without one omits the field, which
// server-side apply then removes.
func TestApplyObjectApplyError(t *testing.T) {
	r := Report{Namespace: "ns", Name: "llama", AppliedGeneration: 0,
		ApplyError: &v1alpha1.ApplyError{Generation: 3, Message: "member gpu0 has an unusable endpoint"}}
	router := applyObject("gpu-node-1", r).Object["status"].(map[string]any)["router"]
	want := map[string]any{"node": "gpu-node-1", "appliedGeneration": int64(0),
		"applyError": map[string]any{"generation": int64(3), "message": "member gpu0 has an unusable endpoint"}}
	if !reflect.DeepEqual(router, want) {
		t.Fatalf("status.router = %#v, want %#v", router, want)
	}
	r.ApplyError = nil
	if _, ok := applyObject("gpu-node-1", r).Object["status"].(map[string]any)["router"].(map[string]any)["applyError"]; ok {
		t.Fatal("a report without an apply error writes one")
	}
}

// TestApplyObjectQueue proves a report's queue is written as status.queue,
// and that a report without one omits the field, which server-side apply
// then removes.
func TestApplyObjectQueue(t *testing.T) {
	r := Report{Namespace: "ns", Name: "llama", AppliedGeneration: 2,
		Queue: &v1alpha1.QueueStatus{MaxRequests: 64, Waiting: 3, OldestWaitSeconds: 12}}
	u := applyObject("gpu-node-1", r)
	want := map[string]any{"maxRequests": int64(64), "waiting": int64(3), "oldestWaitSeconds": int64(12)}
	if got := u.Object["status"].(map[string]any)["queue"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("status.queue = %#v, want %#v", got, want)
	}
	_ = u.DeepCopy() // JSON-compatible values only.
	r.Queue = nil
	if _, ok := applyObject("gpu-node-1", r).Object["status"].(map[string]any)["queue"]; ok {
		t.Fatal("a report without a queue writes one")
	}
}

// TestReportEqual proves a changed apply error is a changed report, so the
// reporter writes it.
func TestReportEqual(t *testing.T) {
	base := Report{Namespace: "ns", Name: "llama", AppliedGeneration: 2}
	failed := base
	failed.ApplyError = &v1alpha1.ApplyError{Generation: 3, Message: "m"}
	again := base
	again.ApplyError = &v1alpha1.ApplyError{Generation: 3, Message: "m"}
	other := base
	other.ApplyError = &v1alpha1.ApplyError{Generation: 4, Message: "m"}
	switch {
	case !base.equal(base), !failed.equal(again):
		t.Fatal("equal reports differ")
	case base.equal(failed), failed.equal(base), failed.equal(other):
		t.Fatal("reports with different apply errors are equal")
	}

	// The queue: its load alone is a change sameButQueueLoad ignores; a
	// queue that appears, goes or changes its bound is not.
	withQueue := func(max, waiting, oldest int32) Report {
		r := base
		r.Queue = &v1alpha1.QueueStatus{MaxRequests: max, Waiting: waiting, OldestWaitSeconds: oldest}
		return r
	}
	for _, tc := range []struct {
		name            string
		a, b            Report
		equal, loadOnly bool
	}{
		{"same queue", withQueue(64, 3, 12), withQueue(64, 3, 12), true, true},
		{"waiting", withQueue(64, 3, 12), withQueue(64, 4, 12), false, true},
		{"oldest wait", withQueue(64, 3, 12), withQueue(64, 3, 13), false, true},
		{"bound", withQueue(64, 3, 12), withQueue(128, 3, 12), false, false},
		{"queue added", base, withQueue(64, 0, 0), false, false},
		{"queue removed", withQueue(64, 0, 0), base, false, false},
		{"apply error with the same load", withQueue(64, 3, 12), func() Report { r := withQueue(64, 3, 12); r.ApplyError = failed.ApplyError; return r }(), false, false},
	} {
		if got := tc.a.equal(tc.b); got != tc.equal {
			t.Errorf("%s: equal = %t, want %t", tc.name, got, tc.equal)
		}
		if got := tc.a.sameButQueueLoad(tc.b); got != tc.loadOnly {
			t.Errorf("%s: sameButQueueLoad = %t, want %t", tc.name, got, tc.loadOnly)
		}
	}
}

// statusClient answers every status apply with err and records the options.
type statusClient struct {
	client.SubResourceWriter
	err  error
	opts []client.SubResourceApplyOption
}

func (c *statusClient) Status() client.SubResourceWriter { return c }

func (c *statusClient) Apply(_ context.Context, _ runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	c.opts = opts
	return c.err
}

func TestAPIWriterErrors(t *testing.T) {
	r := Report{Namespace: "ns", Name: "llama", AppliedGeneration: 1}
	c := &statusClient{}
	w := NewAPIWriter(c)
	if err := w.Write(context.Background(), "n", r); err != nil {
		t.Fatal(err)
	}
	applied := &client.SubResourceApplyOptions{}
	applied.ApplyOpts(c.opts)
	if applied.FieldManager != FieldManager || applied.Force == nil || !*applied.Force {
		t.Fatalf("apply options = %+v, want field manager %s with force", applied, FieldManager)
	}

	c.err = apierrors.NewNotFound(schema.GroupResource{Group: "sluice.dev", Resource: "replicatiers"}, "llama")
	if err := w.Write(context.Background(), "n", r); !errors.Is(err, ErrTierGone) {
		t.Fatalf("NotFound: %v, want ErrTierGone", err)
	}
	c.err = errors.New("boom")
	if err := w.Write(context.Background(), "n", r); err == nil || errors.Is(err, ErrTierGone) {
		t.Fatalf("other error: %v", err)
	}
}

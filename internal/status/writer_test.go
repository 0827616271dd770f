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

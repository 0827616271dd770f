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

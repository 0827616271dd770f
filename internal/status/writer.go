package status

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// FieldManager is the field manager of the router's status writes. The
// manager writes its own fields under another name, so neither overwrites
// the other's.
const FieldManager = "sluice-router"

// APIWriter writes reports to the API server with server-side apply on the
// status subresource, forcing ownership of status.router and
// status.members. The router needs patch on replicatiers/status for it,
// nothing more.
type APIWriter struct {
	c client.StatusClient
}

// NewAPIWriter returns an APIWriter using c.
func NewAPIWriter(c client.StatusClient) *APIWriter { return &APIWriter{c: c} }

// Write applies the report. A missing tier is reported as ErrTierGone.
func (w *APIWriter) Write(ctx context.Context, node string, report Report) error {
	err := w.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(applyObject(node, report)),
		client.FieldOwner(FieldManager), client.ForceOwnership)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %s", ErrTierGone, report.Key())
	case err != nil:
		return fmt.Errorf("status: apply %s: %w", report.Key(), err)
	}
	return nil
}

// applyObject is the apply configuration of one report: exactly the
// router-owned fields. Every member entry is listed, so a member the router
// no longer applies leaves status.members with the next apply, and
// status.router.applyError and status.queue leave with the first apply
// that omits them.
func applyObject(node string, report Report) *unstructured.Unstructured {
	members := make([]any, 0, len(report.Members))
	for _, m := range report.Members {
		members = append(members, map[string]any{"id": m.ID, "ready": m.Ready, "phase": string(m.Phase)})
	}
	rs := map[string]any{"node": node, "appliedGeneration": report.AppliedGeneration}
	if e := report.ApplyError; e != nil {
		rs["applyError"] = map[string]any{"generation": e.Generation, "message": e.Message}
	}
	st := map[string]any{"router": rs, "members": members}
	if q := report.Queue; q != nil {
		// int64, as unstructured content must be to deep-copy.
		st["queue"] = map[string]any{"maxRequests": int64(q.MaxRequests), "waiting": int64(q.Waiting),
			"oldestWaitSeconds": int64(q.OldestWaitSeconds)}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "ReplicaTier",
		"metadata":   map[string]any{"name": report.Name, "namespace": report.Namespace},
		"status":     st,
	}}
}

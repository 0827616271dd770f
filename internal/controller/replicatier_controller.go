package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// NodeNameField is the cache index of ReplicaTiers by spec.nodeName; alias
// conflicts are resolved among the tiers of one node.
const NodeNameField = "spec.nodeName"

// FieldManager is the field manager of the manager's status patches.
const FieldManager = "sluice-manager"

// Event reasons the reconciler records.
const (
	// EventRejected marks a tier that is no longer accepted.
	EventRejected = "Rejected"
	// EventAccepted marks a tier that became accepted.
	EventAccepted = "Accepted"
	// EventQuiesced marks a tier or member whose quiesce intent was applied.
	EventQuiesced = "Quiesced"
	// EventReadmitted marks a tier or member whose quiesce intent was lifted.
	EventReadmitted = "Readmitted"
	// EventDrained marks a quiesced member the router reports with no request
	// in flight.
	EventDrained = "Drained"
)

// ReplicaTierReconciler validates ReplicaTiers and writes their admission
// intent and conditions to status.
type ReplicaTierReconciler struct {
	// Client reads tiers from the cache and patches their status.
	Client client.Client
	// Recorder records events on tiers.
	Recorder recorder.EventRecorder
	// Clock stamps condition transitions; nil means the real clock.
	Clock clock.PassiveClock

	// drained remembers, per tier, which members the router last reported
	// Drained, so a Drained event is recorded once per transition. Deleted
	// tiers are forgotten by the peer handler's delete callback.
	mu      sync.Mutex
	drained map[types.UID]map[string]bool
}

// The manager's ClusterRole, exactly what it uses (test/install proves it
// from the API server's audit log): the cache lists and watches tiers
// (reads never reach the API server as a get), status is written with a
// merge patch only, and an isomorphic event is recorded as a series patch.
// +kubebuilder:rbac:groups=sluice.dev,resources=replicatiers,verbs=list;watch
// +kubebuilder:rbac:groups=sluice.dev,resources=replicatiers/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates one ReplicaTier and patches its manager-owned status
// once, and not at all when nothing changed.
func (r *ReplicaTierReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tier sluicev1.ReplicaTier
	if err := r.Client.Get(ctx, req.NamespacedName, &tier); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tier.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.reconcileStatus(ctx, &tier)
}

func (r *ReplicaTierReconciler) reconcileStatus(ctx context.Context, tier *sluicev1.ReplicaTier) error {
	var peers sluicev1.ReplicaTierList
	if err := r.Client.List(ctx, &peers, client.MatchingFields{NodeNameField: tier.Spec.NodeName}); err != nil {
		return fmt.Errorf("list tiers on node: %w", err)
	}
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	want := desiredStatus(tier, peers.Items, metav1.NewTime(clk.Now()))
	before := tier.DeepCopy()

	if !managerStatusEqual(&tier.Status, want) {
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		tier.Status.ObservedGeneration = want.observedGeneration
		tier.Status.MemberCount = want.memberCount
		tier.Status.Conditions = want.conditions
		tier.Status.Admission = want.admission
		if err := r.Client.Status().Patch(ctx, tier, patch, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("patch status: %w", err)
		}
		logf.FromContext(ctx).V(1).Info("status patched", "generation", tier.Generation)
		r.recordTransitions(before, tier)
	}
	r.recordDrained(tier)
	return nil
}

func managerStatusEqual(s *sluicev1.ReplicaTierStatus, want managerStatus) bool {
	return s.ObservedGeneration == want.observedGeneration &&
		s.MemberCount == want.memberCount &&
		equality.Semantic.DeepEqual(s.Conditions, want.conditions) &&
		equality.Semantic.DeepEqual(s.Admission, want.admission)
}

// recordTransitions records events for acceptance and quiesce intent that
// changed between the old and the new status.
func (r *ReplicaTierReconciler) recordTransitions(old, cur *sluicev1.ReplicaTier) {
	oldAcc := meta.FindStatusCondition(old.Status.Conditions, string(sluicev1.ConditionAccepted))
	newAcc := meta.FindStatusCondition(cur.Status.Conditions, string(sluicev1.ConditionAccepted))
	if newAcc != nil && (oldAcc == nil || oldAcc.Status != newAcc.Status || oldAcc.Reason != newAcc.Reason) {
		if newAcc.Status == metav1.ConditionTrue {
			r.Recorder.Eventf(cur, nil, "Normal", EventAccepted, "Validate", "tier accepted")
		} else {
			r.Recorder.Eventf(cur, nil, "Warning", EventRejected, "Validate", "%s: %s", newAcc.Reason, newAcc.Message)
		}
	}

	var oldTier sluicev1.TierAdmission
	oldMembers := map[string]string{}
	if a := old.Status.Admission; a != nil {
		oldTier = a.Tier
		for _, m := range a.Members {
			oldMembers[m.ID] = m.Reason
		}
	}
	a := cur.Status.Admission
	if a == nil {
		return
	}
	switch {
	case a.Tier.Quiesced && !oldTier.Quiesced:
		r.Recorder.Eventf(cur, nil, "Normal", EventQuiesced, "Quiesce", "tier quiesced: %s", a.Tier.Reason)
	case !a.Tier.Quiesced && oldTier.Quiesced:
		r.Recorder.Eventf(cur, nil, "Normal", EventReadmitted, "Readmit", "tier readmitted")
	}
	for _, m := range a.Members {
		if _, was := oldMembers[m.ID]; !was {
			r.Recorder.Eventf(cur, nil, "Normal", EventQuiesced, "Quiesce", "member %s quiesced: %s", m.ID, m.Reason)
		}
		delete(oldMembers, m.ID)
	}
	for _, id := range slices.Sorted(maps.Keys(oldMembers)) {
		r.Recorder.Eventf(cur, nil, "Normal", EventReadmitted, "Readmit", "member %s readmitted", id)
	}
}

// recordDrained records a Drained event when the router first reports a
// member Drained, and forgets members that left the phase.
func (r *ReplicaTierReconciler) recordDrained(tier *sluicev1.ReplicaTier) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drained == nil {
		r.drained = map[types.UID]map[string]bool{}
	}
	prev := r.drained[tier.UID]
	now := map[string]bool{}
	for _, m := range tier.Status.Members {
		if m.Phase != sluicev1.MemberDrained {
			continue
		}
		now[m.ID] = true
		if !prev[m.ID] {
			r.Recorder.Eventf(tier, nil, "Normal", EventDrained, "Drain", "member %s drained", m.ID)
		}
	}
	r.drained[tier.UID] = now
}

// SetupWithManager indexes tiers by node and registers the reconciler. A
// change to one tier also requeues the other tiers on its node (and on its
// old node when it moved), because alias ownership depends on all of them.
func (r *ReplicaTierReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &sluicev1.ReplicaTier{}, NodeNameField,
		func(o client.Object) []string { return []string{o.(*sluicev1.ReplicaTier).Spec.NodeName} }); err != nil {
		return fmt.Errorf("index %s: %w", NodeNameField, err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&sluicev1.ReplicaTier{}).
		Watches(&sluicev1.ReplicaTier{}, r.peerHandler(mgr.GetClient()),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("replicatier").
		Complete(r)
}

// peerHandler enqueues the other tiers on the node of a created, deleted or
// re-specified tier.
func (r *ReplicaTierReconciler) peerHandler(c client.Client) handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], self client.Object, node string) {
		var list sluicev1.ReplicaTierList
		if err := c.List(ctx, &list, client.MatchingFields{NodeNameField: node}); err != nil {
			logf.FromContext(ctx).Error(err, "list peers", "node", node)
			return
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.UID != self.GetUID() {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
			}
		}
	}
	nodeOf := func(o client.Object) string { return o.(*sluicev1.ReplicaTier).Spec.NodeName }
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object, nodeOf(e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectNew, nodeOf(e.ObjectNew))
			if old := nodeOf(e.ObjectOld); old != nodeOf(e.ObjectNew) {
				enqueue(ctx, q, e.ObjectNew, old)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.mu.Lock()
			delete(r.drained, e.Object.GetUID())
			r.mu.Unlock()
			enqueue(ctx, q, e.Object, nodeOf(e.Object))
		},
	}
}

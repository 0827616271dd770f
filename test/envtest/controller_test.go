package envtest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
	"github.com/sluice-dev/sluice/internal/status"
)

var nsCounter atomic.Int64

// newNamespace creates a fresh namespace so specs never see each other's
// tiers or events.
func newNamespace(ctx context.Context) string {
	name := fmt.Sprintf("ctrl-%d", nsCounter.Add(1))
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

func tierIn(ns, name, node string, aliases ...string) *sluicev1.ReplicaTier {
	t := validationtable.Base()
	t.Namespace, t.Name = ns, name
	t.Spec.NodeName = node
	if len(aliases) > 0 {
		t.Spec.Aliases = aliases
	}
	return t
}

func get(ctx context.Context, t *sluicev1.ReplicaTier) *sluicev1.ReplicaTier {
	out := &sluicev1.ReplicaTier{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), out)).To(Succeed())
	return out
}

// condition returns the status, reason and observed generation of one
// condition, for Eventually.
func condition(ctx context.Context, t *sluicev1.ReplicaTier, ct sluicev1.ConditionType) func() string {
	return func() string {
		cur := get(ctx, t)
		c := meta.FindStatusCondition(cur.Status.Conditions, string(ct))
		if c == nil {
			return "absent"
		}
		return fmt.Sprintf("%s/%s/%d/%d", c.Status, c.Reason, c.ObservedGeneration, cur.Generation)
	}
}

func want(status metav1.ConditionStatus, reason sluicev1.ConditionReason, gen int64) string {
	return fmt.Sprintf("%s/%s/%d/%d", status, reason, gen, gen)
}

// mergePatch sends a JSON merge patch to the spec, as `kubectl patch --type
// merge` does.
func mergePatch(ctx context.Context, t *sluicev1.ReplicaTier, body string) error {
	return k8sClient.Patch(ctx, t.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body)))
}

// routerApply writes router-owned status with server-side apply under the
// router's field manager, as the router on the node does.
func routerApply(ctx context.Context, t *sluicev1.ReplicaTier, appliedGeneration int64, members []map[string]any) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sluicev1.GroupVersion.String(),
		"kind":       "ReplicaTier",
		"metadata":   map[string]any{"name": t.Name, "namespace": t.Namespace},
		"status": map[string]any{
			"router":  map[string]any{"node": t.Spec.NodeName, "appliedGeneration": appliedGeneration},
			"members": members,
		},
	}}
	Expect(k8sClient.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("sluice-router"), client.ForceOwnership)).To(Succeed())
}

func eventReasons(ctx context.Context, t *sluicev1.ReplicaTier) func() []string {
	return func() []string {
		var list eventsv1.EventList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(t.Namespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == t.Name {
				out = append(out, e.Reason+": "+e.Note)
			}
		}
		return out
	}
}

var _ = Describe("ReplicaTier controller", func() {
	It("accepts a valid tier and writes its admission intent", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		cur := get(ctx, t)
		Expect(cur.Status.ObservedGeneration).To(Equal(int64(1)))
		Expect(cur.Status.MemberCount).To(Equal(int32(2)))
		Expect(cur.Status.Admission).To(Equal(&sluicev1.AdmissionStatus{}))
		Expect(meta.FindStatusCondition(cur.Status.Conditions, string(sluicev1.ConditionProgrammed)).Reason).
			To(Equal(string(sluicev1.ReasonNoRouter)))
		Expect(meta.FindStatusCondition(cur.Status.Conditions, string(sluicev1.ConditionReady)).Status).
			To(Equal(metav1.ConditionFalse))
		Eventually(eventReasons(ctx, t)).Should(ContainElement("Accepted: tier accepted"))
	})

	It("follows merge patches of member and tier quiesce intent", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))

		admission := func() *sluicev1.AdmissionStatus {
			cur := get(ctx, t)
			if cur.Status.ObservedGeneration != cur.Generation {
				return nil
			}
			return cur.Status.Admission
		}

		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu1":"maintenance"}}}}`)).To(Succeed())
		Eventually(admission).Should(Equal(&sluicev1.AdmissionStatus{
			Members: []sluicev1.MemberAdmission{{ID: "gpu1", Quiesced: true, Reason: "maintenance"}},
		}))
		Expect(get(ctx, t).Status.ObservedGeneration).To(Equal(int64(2)))

		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu0":"driver-upgrade"}}}}`)).To(Succeed())
		Eventually(admission).Should(Equal(&sluicev1.AdmissionStatus{
			Members: []sluicev1.MemberAdmission{
				{ID: "gpu0", Quiesced: true, Reason: "driver-upgrade"},
				{ID: "gpu1", Quiesced: true, Reason: "maintenance"},
			},
		}))

		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"tier":"maintenance"}}}`)).To(Succeed())
		Eventually(admission).Should(Equal(&sluicev1.AdmissionStatus{
			Tier: sluicev1.TierAdmission{Quiesced: true, Reason: "maintenance"},
			Members: []sluicev1.MemberAdmission{
				{ID: "gpu0", Quiesced: true, Reason: "driver-upgrade"},
				{ID: "gpu1", Quiesced: true, Reason: "maintenance"},
			},
		}))

		// Readmitting a member leaves the tier quiesced, and the reverse.
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu1":null}}}}`)).To(Succeed())
		Eventually(admission).Should(Equal(&sluicev1.AdmissionStatus{
			Tier:    sluicev1.TierAdmission{Quiesced: true, Reason: "maintenance"},
			Members: []sluicev1.MemberAdmission{{ID: "gpu0", Quiesced: true, Reason: "driver-upgrade"}},
		}))
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"tier":null}}}`)).To(Succeed())
		Eventually(admission).Should(Equal(&sluicev1.AdmissionStatus{
			Members: []sluicev1.MemberAdmission{{ID: "gpu0", Quiesced: true, Reason: "driver-upgrade"}},
		}))
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu0":null}}}}`)).To(Succeed())
		Eventually(admission).Should(Equal(&sluicev1.AdmissionStatus{}))
		Expect(get(ctx, t).Status.ObservedGeneration).To(Equal(int64(7)))

		Eventually(eventReasons(ctx, t)).Should(ContainElements(
			"Quiesced: member gpu1 quiesced: maintenance",
			"Quiesced: member gpu0 quiesced: driver-upgrade",
			"Quiesced: tier quiesced: maintenance",
			"Readmitted: member gpu1 readmitted",
			"Readmitted: tier readmitted",
			"Readmitted: member gpu0 readmitted",
		))
	})

	It("rejects a quiesce key that is not a member and changes nothing", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		err := mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu7":"maintenance"}}}}`)
		Expect(err).To(MatchError(ContainSubstring("quiesce.members keys must be member ids")))
		Expect(get(ctx, t).Generation).To(Equal(int64(1)))
	})

	It("gives a contested alias to the older tier on one node, and hands it over on deletion", func(ctx context.Context) {
		ns := newNamespace(ctx)
		older := tierIn(ns, "older", "node-conflict", "shared", "only-older")
		Expect(k8sClient.Create(ctx, older)).To(Succeed())
		Eventually(condition(ctx, older, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		// Creation times have one-second resolution; wait for the next second
		// through the API server's own clock rather than sleeping.
		Eventually(func() bool {
			probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-", Namespace: ns}}
			Expect(k8sClient.Create(ctx, probe)).To(Succeed())
			return probe.CreationTimestamp.After(get(ctx, older).CreationTimestamp.Time)
		}).Should(BeTrue())

		newer := tierIn(ns, "newer", "node-conflict", "shared", "only-newer")
		Expect(k8sClient.Create(ctx, newer)).To(Succeed())
		Eventually(condition(ctx, newer, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonAliasConflict, 1)))
		c := meta.FindStatusCondition(get(ctx, newer).Status.Conditions, string(sluicev1.ConditionAccepted))
		Expect(c.Message).To(Equal(fmt.Sprintf(`alias "shared" is held by %s/older`, ns)))
		Expect(meta.FindStatusCondition(get(ctx, newer).Status.Conditions, string(sluicev1.ConditionReady)).Reason).
			To(Equal(string(sluicev1.ReasonNotAccepted)))
		Consistently(condition(ctx, older, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		Eventually(eventReasons(ctx, newer)).Should(ContainElement(ContainSubstring("Rejected: AliasConflict")))

		// A tier on another node may use the same alias.
		elsewhere := tierIn(ns, "elsewhere", "node-other", "shared")
		Expect(k8sClient.Create(ctx, elsewhere)).To(Succeed())
		Eventually(condition(ctx, elsewhere, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))

		Expect(k8sClient.Delete(ctx, older)).To(Succeed())
		Eventually(condition(ctx, newer, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
	})

	It("moves the alias conflict when a tier changes node", func(ctx context.Context) {
		ns := newNamespace(ctx)
		a := tierIn(ns, "a", "node-move-1", "moving")
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Eventually(condition(ctx, a, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		b := tierIn(ns, "b", "node-move-1", "moving")
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Eventually(condition(ctx, b, sluicev1.ConditionAccepted)).Should(HavePrefix("False/AliasConflict"))
		Expect(mergePatch(ctx, a, `{"spec":{"nodeName":"node-move-2"}}`)).To(Succeed())
		Eventually(condition(ctx, b, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
	})

	It("does not write status again when nothing changed", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		// Wait until the manager's cache has caught up with its own patch.
		rv := get(ctx, t).ResourceVersion
		Eventually(func() string {
			cached := &sluicev1.ReplicaTier{}
			Expect(reconciler.Client.Get(ctx, client.ObjectKeyFromObject(t), cached)).To(Succeed())
			return cached.ResourceVersion
		}).Should(Equal(rv))
		for range 3 {
			_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(t)})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(get(ctx, t).ResourceVersion).To(Equal(rv))
	})

	It("derives Programmed and Ready from router-owned status and never writes it", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))

		routerApply(ctx, t, 1, []map[string]any{
			{"id": "gpu0", "ready": true, "phase": "Admitting"},
			{"id": "gpu1", "ready": false, "phase": "Admitting"},
		})
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 1)))
		Eventually(condition(ctx, t, sluicev1.ConditionReady)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonMembersAdmitting, 1)))

		// A spec change the router has not applied yet: Programmed is pending
		// and the manager's own patch leaves the router's fields alone.
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu0":"maintenance"}}}}`)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonPending, 2)))
		cur := get(ctx, t)
		Expect(cur.Status.Router).To(Equal(&sluicev1.RouterStatus{Node: ns, AppliedGeneration: 1}))
		Expect(cur.Status.Members).To(HaveLen(2))
		for _, mf := range cur.ManagedFields {
			if mf.Manager == "sluice-router" {
				Expect(mf.FieldsV1.GetRawString()).To(ContainSubstring(`"f:router"`))
			} else {
				Expect(mf.FieldsV1.GetRawString()).NotTo(ContainSubstring(`"f:router"`), "manager %s owns status.router", mf.Manager)
				Expect(mf.FieldsV1.GetRawString()).NotTo(ContainSubstring(`"f:members":{"k:`), "manager %s owns status.members", mf.Manager)
			}
		}

		// The router applies generation 2 with gpu0 drained and gpu1 unready.
		routerApply(ctx, t, 2, []map[string]any{
			{"id": "gpu0", "ready": true, "phase": "Drained"},
			{"id": "gpu1", "ready": false, "phase": "Admitting"},
		})
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 2)))
		Eventually(condition(ctx, t, sluicev1.ConditionReady)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonNoMemberAdmitting, 2)))
		Eventually(eventReasons(ctx, t)).Should(ContainElement("Drained: member gpu0 drained"))

		// gpu1 becomes ready: Ready again.
		routerApply(ctx, t, 2, []map[string]any{
			{"id": "gpu0", "ready": true, "phase": "Drained"},
			{"id": "gpu1", "ready": true, "phase": "Admitting"},
		})
		Eventually(condition(ctx, t, sluicev1.ConditionReady)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonMembersAdmitting, 2)))
	})

	// The router's own status writer reports the failure here, exactly as
	// internal/status writes a tiers.Set.Applied failure; the router
	// itself refusing a generation (a member off the node, under
	// memberLocality SameHost) is in router_kube_test.go.
	It("reports a generation the router cannot apply as Programmed=False ApplyFailed, and clears it", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		w := status.NewAPIWriter(k8sClient)
		members := []sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}}
		msg := "router: tier cannot be applied: member gpu0 has an unusable endpoint"

		// The first generation fails: nothing is applied.
		Expect(w.Write(ctx, ns, status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 0,
			ApplyError: &sluicev1.ApplyError{Generation: 1, Message: msg}})).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonApplyFailed, 1)))
		c := meta.FindStatusCondition(get(ctx, t).Status.Conditions, string(sluicev1.ConditionProgrammed))
		Expect(c.Message).To(Equal(fmt.Sprintf("router on %s cannot apply generation 1 (it applies no generation of this tier): %s", ns, msg)))

		// Generation 1 applies; generation 2 then fails and 1 stays in force.
		Expect(w.Write(ctx, ns, status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 1, Members: members})).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 1)))
		Expect(get(ctx, t).Status.Router.ApplyError).To(BeNil(), "a report without an apply error removes it")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu0":"maintenance"}}}}`)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonPending, 2)))
		Expect(w.Write(ctx, ns, status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 1, Members: members,
			ApplyError: &sluicev1.ApplyError{Generation: 2, Message: msg}})).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonApplyFailed, 2)))
		c = meta.FindStatusCondition(get(ctx, t).Status.Conditions, string(sluicev1.ConditionProgrammed))
		Expect(c.Message).To(ContainSubstring("cannot apply generation 2 (it still applies generation 1)"))

		// The API server bounds the message.
		long := status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 1,
			ApplyError: &sluicev1.ApplyError{Generation: 2, Message: strings.Repeat("x", sluicev1.MaxApplyErrorMessageLength+1)}}
		Expect(w.Write(ctx, ns, long)).NotTo(Succeed())

		// Generation 2 applies: the error is removed, Programmed is True.
		Expect(w.Write(ctx, ns, status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 2, Members: members})).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 2)))
		Expect(get(ctx, t).Status.Router).To(Equal(&sluicev1.RouterStatus{Node: ns, AppliedGeneration: 2}))
	})

	// The router's queue report (internal/status): stored as written, bounded
	// by the API server, owned by the router alone, and removed by the first
	// report without one.
	It("stores the router's queue report within its bounds and removes it with a report that has none", func(ctx context.Context) {
		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", ns)
		t.Spec.Queue = &sluicev1.QueueSpec{MaxRequests: 64, MaxWait: &metav1.Duration{Duration: 30 * time.Second}}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		w := status.NewAPIWriter(k8sClient)
		members := []sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}}
		report := func(q sluicev1.QueueStatus) status.Report {
			return status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 1, Members: members, Queue: &q}
		}

		Expect(w.Write(ctx, ns, report(sluicev1.QueueStatus{MaxRequests: 64, Waiting: 3, OldestWaitSeconds: 12}))).To(Succeed())
		Expect(get(ctx, t).Status.Queue).To(Equal(&sluicev1.QueueStatus{MaxRequests: 64, Waiting: 3, OldestWaitSeconds: 12}))
		// The extremes the router may write pass.
		edge := sluicev1.QueueStatus{MaxRequests: sluicev1.MaxQueueRequests, Waiting: sluicev1.MaxQueueRequests,
			OldestWaitSeconds: sluicev1.MaxQueueOldestWaitSeconds}
		Expect(w.Write(ctx, ns, report(edge))).To(Succeed())
		Expect(get(ctx, t).Status.Queue).To(Equal(&edge))

		// Beyond the bounds, the API server refuses the write and keeps the
		// last report.
		for _, bad := range []sluicev1.QueueStatus{
			{MaxRequests: 0, Waiting: 0},
			{MaxRequests: sluicev1.MaxQueueRequests + 1},
			{MaxRequests: 64, Waiting: -1},
			{MaxRequests: 64, Waiting: sluicev1.MaxQueueRequests + 1},
			{MaxRequests: 64, OldestWaitSeconds: -1},
			{MaxRequests: 64, OldestWaitSeconds: sluicev1.MaxQueueOldestWaitSeconds + 1},
		} {
			Expect(w.Write(ctx, ns, report(bad))).To(MatchError(ContainSubstring("status.queue")), "%+v", bad)
		}
		cur := get(ctx, t)
		Expect(cur.Status.Queue).To(Equal(&edge))
		for _, mf := range cur.ManagedFields {
			owns := ContainSubstring(`"f:oldestWaitSeconds"`) // a field of status.queue only.
			if mf.Manager == "sluice-router" {
				Expect(mf.FieldsV1.GetRawString()).To(owns)
			} else {
				Expect(mf.FieldsV1.GetRawString()).NotTo(owns, "manager %s owns status.queue", mf.Manager)
			}
		}

		// The manager's own status patches leave the router's queue alone.
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu0":"maintenance"}}}}`)).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonPending, 2)))
		Expect(get(ctx, t).Status.Queue).To(Equal(&edge))

		// A report without a queue (the spec's queue removed) removes it.
		Expect(w.Write(ctx, ns, status.Report{Namespace: ns, Name: "llama", AppliedGeneration: 2, Members: members})).To(Succeed())
		Expect(get(ctx, t).Status.Queue).To(BeNil())
	})
})

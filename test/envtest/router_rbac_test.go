package envtest

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/status"
)

// routerServiceAccount is the router's identity in config/router.
const routerServiceAccount = "system:serviceaccount:sluice-router:sluice-router"

// installRouterRBAC creates the Namespace, ServiceAccount, ClusterRole and
// ClusterRoleBinding of config/router (as rendered by kustomize) and returns
// a configuration that acts as the router's service account, by
// impersonation. It may run more than once.
func installRouterRBAC(ctx context.Context) *rest.Config {
	for _, u := range renderKustomization("router") {
		switch u.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, u.DeepCopy()))).To(Succeed(), u.GetKind())
		}
	}
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: routerServiceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:sluice-router", "system:authenticated"},
	}
	return sa
}

var _ = Describe("router RBAC (config/router)", func() {
	It("lets the router's service account list and watch tiers and patch status, and nothing else", func(ctx context.Context) {
		saCfg := installRouterRBAC(ctx)
		sa, err := client.NewWithWatch(saCfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		ns := newNamespace(ctx)
		t := tierIn(ns, "llama", "node-rbac-"+ns)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())

		By("reading: list and watch with the node field selector")
		list := &sluicev1.ReplicaTierList{}
		Expect(sa.List(ctx, list, client.MatchingFields{source.NodeNameField: t.Spec.NodeName})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		w, err := sa.Watch(ctx, &sluicev1.ReplicaTierList{}, client.MatchingFields{source.NodeNameField: t.Spec.NodeName})
		Expect(err).NotTo(HaveOccurred())
		w.Stop()

		By("writing the router's status with server-side apply")
		writer := status.NewAPIWriter(sa)
		Expect(writer.Write(ctx, t.Spec.NodeName, status.Report{Namespace: ns, Name: t.Name, AppliedGeneration: 1,
			Members: []sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}}})).To(Succeed())
		Expect(get(ctx, t).Status.Router).To(Equal(&sluicev1.RouterStatus{Node: t.Spec.NodeName, AppliedGeneration: 1}))

		By("being forbidden everything else")
		forbidden := func(err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		}
		// The router never reads one tier by name: get is not granted.
		forbidden(sa.Get(ctx, client.ObjectKeyFromObject(t), &sluicev1.ReplicaTier{}))
		cur := &sluicev1.ReplicaTier{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), cur)).To(Succeed())
		cur.Spec.Aliases = []string{"changed"}
		forbidden(sa.Update(ctx, cur.DeepCopy()))
		forbidden(sa.Patch(ctx, cur.DeepCopy(), client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"quiesce":{"tier":"maintenance"}}}`))))
		forbidden(sa.Status().Update(ctx, cur.DeepCopy()))
		forbidden(sa.Delete(ctx, cur.DeepCopy()))
		forbidden(sa.Create(ctx, tierIn(ns, "other", "node-rbac-"+ns, "other")))
		forbidden(sa.List(ctx, &corev1.SecretList{}, client.InNamespace("sluice-router")))
		forbidden(sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
		forbidden(sa.List(ctx, &corev1.PodList{}))
		forbidden(sa.Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "e-"},
			Regarding:  corev1.ObjectReference{Kind: "ReplicaTier", Name: t.Name, Namespace: ns},
			Reason:     "Test", Action: "Test", Type: "Normal", ReportingController: "x", ReportingInstance: "y",
			EventTime: metav1.NowMicro(),
		}))
		Expect(get(ctx, t).Spec.Aliases).To(Equal(t.Spec.Aliases))
	})
})

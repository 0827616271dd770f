package envtest

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/status"
)

const (
	// nodeNameExtra is the user extra kube-apiserver sets from a
	// service-account token bound to a pod on a node.
	nodeNameExtra = "authentication.kubernetes.io/node-name"
	// nodePolicy names the ValidatingAdmissionPolicy and its binding in
	// config/router/node_policy.yaml.
	nodePolicy = "sluice-router-own-node"
	// tokenSeconds is the lifetime of the tokens the specs request: the
	// TokenRequest API's minimum, far longer than a spec.
	tokenSeconds = 600
)

// installNodePolicy creates the ValidatingAdmissionPolicy and binding of
// config/router exactly as kustomize renders them and waits until the API
// server enforces them: until probe, a write the policy denies, fails with
// the policy's name. When the spec ends it removes them and waits until
// allowed, a write by the router's impersonated identity (which names no
// node), passes again, so that no other spec meets the policy. Both should
// be dry runs: they pass admission but store nothing. Each gets the context
// of its own wait (the spec's ends before the cleanup runs).
func installNodePolicy(ctx context.Context, probe, allowed func(context.Context) error) {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	for _, u := range renderKustomization("router") {
		switch u.GetKind() {
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			objs = append(objs, u)
		}
	}
	Expect(objs).To(HaveLen(2), "config/router must render the policy and its binding")
	for _, u := range objs {
		Expect(k8sClient.Create(ctx, u.DeepCopy())).To(Succeed(), u.GetKind())
	}
	DeferCleanup(func(ctx context.Context) {
		for _, u := range objs {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, u.DeepCopy()))).To(Succeed())
		}
		// The API server drops the policy a moment after it is deleted.
		Eventually(allowed).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(Succeed())
	})
	// ...and enforces it a moment after it is created.
	Eventually(probe).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(MatchError(ContainSubstring("ValidatingAdmissionPolicy '" + nodePolicy + "'")))
}

// routerPodToken creates Node node and a Pod of the router's ServiceAccount
// scheduled on it (as the DaemonSet's pod is), and returns a token bound to
// that Pod from the TokenRequest API: what the kubelet projects into the
// router's pod. Both objects are deleted when the spec ends.
func routerPodToken(ctx context.Context, node string) string {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))).To(Succeed())
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sluice-router", GenerateName: "sluice-router-"},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "sluice-router",
			Containers:         []corev1.Container{{Name: "router", Image: "sluice-router"}},
		},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		// No kubelet confirms a graceful deletion here.
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
	})
	return requestToken(ctx, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
}

// requestToken returns a token of the router's ServiceAccount from the
// TokenRequest API, bound to bound when it is not nil.
func requestToken(ctx context.Context, bound *authenticationv1.BoundObjectReference) string {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "sluice-router", Name: "sluice-router"}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](tokenSeconds),
		BoundObjectRef:    bound,
	}}
	Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return tr.Status.Token
}

// tokenClient returns a client of the suite's API server that authenticates
// with token alone.
func tokenClient(token string) client.WithWatch {
	GinkgoHelper()
	c, err := client.NewWithWatch(&rest.Config{
		Host:            cfg.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData},
		BearerToken:     token,
	}, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// whoAmI returns the user the API server sees behind c.
func whoAmI(ctx context.Context, c client.Client) authenticationv1.UserInfo {
	GinkgoHelper()
	r := &authenticationv1.SelfSubjectReview{}
	Expect(c.Create(ctx, r)).To(Succeed())
	return r.Status.UserInfo
}

// dryRunApply applies the router's status of t as a router of node would,
// as a server-side dry run: admission runs, nothing is stored.
func dryRunApply(ctx context.Context, c client.Client, node string, t *sluicev1.ReplicaTier) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sluicev1.GroupVersion.String(), "kind": "ReplicaTier",
		"metadata": map[string]any{"namespace": t.Namespace, "name": t.Name},
		"status":   map[string]any{"router": map[string]any{"node": node, "appliedGeneration": int64(1)}},
	}}
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(status.FieldManager), client.ForceOwnership, client.DryRunAll)
}

// routerReport is a report of tier t as a router writes it.
func routerReport(t *sluicev1.ReplicaTier) status.Report {
	return status.Report{Namespace: t.Namespace, Name: t.Name, AppliedGeneration: 1,
		Members: []sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}}}
}

var _ = Describe("the router's own-node policy (config/router/node_policy.yaml)", func() {
	It("lets a router's pod token write the status of its own node's tiers only", func(ctx context.Context) {
		impersonated := installRouterRBAC(ctx)
		ns := newNamespace(ctx)
		nodeA, nodeB := "policy-a-"+ns, "policy-b-"+ns
		tierA, tierB := tierIn(ns, "tier-a", nodeA), tierIn(ns, "tier-b", nodeB)
		Expect(k8sClient.Create(ctx, tierA)).To(Succeed())
		Expect(k8sClient.Create(ctx, tierB)).To(Succeed())

		By("a token bound to router A's pod, which names node A")
		routerA := tokenClient(routerPodToken(ctx, nodeA))
		user := whoAmI(ctx, routerA)
		Expect(user.Username).To(Equal(routerServiceAccount))
		Expect(user.Extra).To(HaveKeyWithValue(nodeNameExtra, ConsistOf(nodeA)),
			"kube-apiserver names the pod's node in a pod-bound token (ServiceAccountTokenPodNodeInfo)")
		writerA := status.NewAPIWriter(routerA)

		imp, err := client.New(impersonated, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		installNodePolicy(ctx,
			func(ctx context.Context) error { return dryRunApply(ctx, routerA, nodeA, tierB) },
			func(ctx context.Context) error { return dryRunApply(ctx, imp, nodeA, tierA) })

		By("router A's forced apply of node B's status is denied, naming both nodes")
		err = writerA.Write(ctx, nodeA, routerReport(tierB))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(err).To(MatchError(ContainSubstring("the router of node " + nodeA + " may write only the ReplicaTiers of its own node; " +
			ns + "/tier-b is on node " + nodeB)))
		Expect(get(ctx, tierB).Status.Router).To(BeNil())

		By("router A cannot rewrite node B's quiesce intent (status.admission) either")
		Eventually(func() *sluicev1.AdmissionStatus { return get(ctx, tierB).Status.Admission }).ShouldNot(BeNil(),
			"the manager writes status.admission")
		admission := get(ctx, tierB).Status.Admission
		forged := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": sluicev1.GroupVersion.String(), "kind": "ReplicaTier",
			"metadata": map[string]any{"namespace": ns, "name": tierB.Name},
			"status": map[string]any{"admission": map[string]any{
				"tier": map[string]any{"quiesced": true, "reason": "forged"}}},
		}}
		err = routerA.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(forged),
			client.FieldOwner(status.FieldManager), client.ForceOwnership)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(get(ctx, tierB).Status.Admission).To(Equal(admission))

		By("router A's apply of its own node's status is written")
		Expect(writerA.Write(ctx, nodeA, routerReport(tierA))).To(Succeed())
		Expect(get(ctx, tierA).Status.Router).To(Equal(&sluicev1.RouterStatus{Node: nodeA, AppliedGeneration: 1}))

		By("a token of the router's ServiceAccount that names no node is denied, even for node A's tier")
		unbound := tokenClient(requestToken(ctx, nil))
		Expect(whoAmI(ctx, unbound).Extra).NotTo(HaveKey(nodeNameExtra))
		err = status.NewAPIWriter(unbound).Write(ctx, nodeA, routerReport(tierA))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(err).To(MatchError(ContainSubstring("this token names none")))

		By("other users are left alone: an administrator writes node B's status")
		Expect(k8sClient.Status().Patch(ctx, get(ctx, tierB), client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"router":{"node":"`+nodeB+`","appliedGeneration":1}}}`)))).To(Succeed())
		Expect(get(ctx, tierB).Status.Router).To(Equal(&sluicev1.RouterStatus{Node: nodeB, AppliedGeneration: 1}))
	})
})

var _ = Describe("the kube source's lister-watcher (source.NewTierListerWatcher)", func() {
	It("asks the API server for its node's tiers only, in the list and in the watch", func(ctx context.Context) {
		sa, err := client.NewWithWatch(installRouterRBAC(ctx), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace(ctx)
		nodeA, nodeB := "lw-a-"+ns, "lw-b-"+ns
		Expect(k8sClient.Create(ctx, tierIn(ns, "a1", nodeA))).To(Succeed())
		Expect(k8sClient.Create(ctx, tierIn(ns, "b1", nodeB))).To(Succeed())
		lw := source.NewTierListerWatcher(sa, nodeA)

		By("the list holds node A's tier alone")
		var list *sluicev1.ReplicaTierList
		Eventually(func() error { // the router's ClusterRoleBinding takes a moment.
			obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
			if err == nil {
				list = obj.(*sluicev1.ReplicaTierList)
			}
			return err
		}).Should(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Name).To(Equal("a1"))

		By("the watch sends node A's events alone: B's tier, created first, never arrives")
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		Expect(k8sClient.Create(ctx, tierIn(ns, "b2", nodeB))).To(Succeed())
		Expect(k8sClient.Create(ctx, tierIn(ns, "a2", nodeA))).To(Succeed())
		var ev watch.Event
		Eventually(w.ResultChan()).Should(Receive(&ev))
		Expect(ev.Type).To(Equal(watch.Added))
		Expect(ev.Object.(*sluicev1.ReplicaTier).Name).To(Equal("a2"))
	})
})

package envtest

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// renderKustomization builds a kustomization of the repository's config
// directory (as `kubectl kustomize config/<dir>` does) and returns its
// objects.
func renderKustomization(dir string) []*unstructured.Unstructured {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "config", dir))
	Expect(err).NotTo(HaveOccurred())
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		Expect(err).NotTo(HaveOccurred())
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// find returns the rendered object of kind and name.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	GinkgoHelper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	Fail("rendered manifests have no " + kind + " " + name)
	return nil
}

// typed finds the rendered object of kind and name and converts it.
func typed[T any, P interface {
	*T
	runtime.Object
}](objs []*unstructured.Unstructured, kind, name string) P {
	GinkgoHelper()
	out := P(new(T))
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, kind, name).Object, out)).To(Succeed())
	return out
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

var _ = Describe("rendered manifests (kustomize build config/default)", func() {
	var objs []*unstructured.Unstructured
	BeforeEach(func() { objs = renderKustomization("default") })

	It("install the CRD, the manager and the router", func() {
		kinds := map[string]bool{}
		for _, u := range objs {
			kinds[u.GetKind()+"/"+u.GetName()] = true
		}
		for _, want := range []string{
			"CustomResourceDefinition/replicatiers.sluice.dev",
			"Deployment/sluice-manager",
			"Service/sluice-manager-metrics",
			"DaemonSet/sluice-router",
			"ServiceAccount/sluice-router",
			"ClusterRole/sluice-router",
			"ClusterRoleBinding/sluice-router",
			"Namespace/sluice-router",
			"ValidatingAdmissionPolicy/sluice-router-own-node",
			"ValidatingAdmissionPolicyBinding/sluice-router-own-node",
		} {
			Expect(kinds).To(HaveKey(want))
		}
	})

	It("run the router on the node's network, non-root, read-only, without capabilities", func() {
		ds := typed[appsv1.DaemonSet](objs, "DaemonSet", "sluice-router")
		pod := ds.Spec.Template.Spec
		Expect(pod.HostNetwork).To(BeTrue())
		Expect(pod.DNSPolicy).To(Equal(corev1.DNSClusterFirstWithHostNet))
		Expect(pod.NodeSelector).To(HaveKeyWithValue("sluice.dev/router", "true"))
		Expect(pod.Tolerations).To(ContainElement(corev1.Toleration{
			Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
		}))
		Expect(pod.ServiceAccountName).To(Equal("sluice-router"))
		Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(pod.SecurityContext.SeccompProfile).To(HaveValue(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault)))

		Expect(pod.Containers).To(HaveLen(1))
		ctr := pod.Containers[0]
		sc := ctr.SecurityContext
		Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
		Expect(sc.Capabilities.Add).To(BeEmpty())
		Expect(sc.Privileged).To(BeNil())

		// NODE_NAME from the downward API; the router reads it by default.
		Expect(ctr.Env).To(ContainElement(corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
		}}))
		Expect(flagValue(ctr.Args, "tiers-dir")).To(BeEmpty(), "the DaemonSet runs the kube source")
		Expect(ctr.Args).To(ContainElement("--ready-without-tiers"), "a node without tiers must not block a rollout")

		// Probes on the admin port, given by number: no port is declared,
		// since with hostNetwork a declared port is a host port, which would
		// keep the surge pod of a rollout from being scheduled.
		adminPort := flagValue(ctr.Args, "admin-listen")
		Expect(adminPort).To(Equal(":9090"))
		Expect(ctr.Ports).To(BeEmpty())
		Expect(ctr.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(ctr.LivenessProbe.HTTPGet.Port.IntValue()).To(Equal(9090))
		Expect(ctr.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(ctr.ReadinessProbe.HTTPGet.Port.IntValue()).To(Equal(9090))
		Expect(ds.Spec.UpdateStrategy.RollingUpdate).NotTo(BeNil())
		Expect(ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge.String()).To(Equal("1"))
		Expect(ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()).To(Equal("0"))

		Expect(ctr.Resources.Requests.Cpu().IsZero()).To(BeFalse())
		Expect(ctr.Resources.Requests.Memory().IsZero()).To(BeFalse())

		// The grace period outlasts the router's own shutdown grace and
		// timeout.
		shutdown, err := time.ParseDuration(flagValue(ctr.Args, "shutdown-timeout"))
		Expect(err).NotTo(HaveOccurred())
		grace, err := time.ParseDuration(flagValue(ctr.Args, "shutdown-grace"))
		Expect(err).NotTo(HaveOccurred())
		Expect(pod.TerminationGracePeriodSeconds).NotTo(BeNil())
		Expect(time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second).To(BeNumerically(">", grace+shutdown))

		// API keys and the admin token are files from Secrets.
		mounts := map[string]string{}
		for _, m := range ctr.VolumeMounts {
			Expect(m.ReadOnly).To(BeTrue(), m.Name)
			mounts[m.Name] = m.MountPath
		}
		secrets := map[string]string{}
		for _, v := range pod.Volumes {
			Expect(v.Secret).NotTo(BeNil(), "volume %s is not a Secret", v.Name)
			secrets[v.Name] = v.Secret.SecretName
		}
		Expect(flagValue(ctr.Args, "api-keys-file")).To(HavePrefix(mounts["api-keys"] + "/"))
		Expect(flagValue(ctr.Args, "admin-token-file")).To(HavePrefix(mounts["admin-token"] + "/"))
		Expect(secrets).To(Equal(map[string]string{ //nolint:gosec // Secret names, not credentials.
			"api-keys": "sluice-router-api-keys", "admin-token": "sluice-router-admin-token",
		}))
	})

	// test/install proves from the API server's audit log that the
	// programs use each of these grants and need no other.
	It("grant the router exactly list/watch on replicatiers and patch on replicatiers/status", func() {
		role := typed[rbacv1.ClusterRole](objs, "ClusterRole", "sluice-router")
		Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"replicatiers"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"replicatiers/status"}, Verbs: []string{"patch"}},
		}))
		binding := typed[rbacv1.ClusterRoleBinding](objs, "ClusterRoleBinding", "sluice-router")
		Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "sluice-router"}))
		Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "sluice-router", Namespace: "sluice-router"}}))
		for _, u := range objs {
			if u.GetKind() == "Role" || u.GetKind() == "RoleBinding" {
				Expect(u.GetName()).NotTo(ContainSubstring("router"), "the router has no namespaced role")
			}
		}
	})

	It("grant the manager exactly its reconciler's and leader election's verbs", func() {
		role := typed[rbacv1.ClusterRole](objs, "ClusterRole", "sluice-manager")
		Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"replicatiers"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"replicatiers/status"}, Verbs: []string{"patch"}},
		}))
		election := typed[rbacv1.Role](objs, "Role", "sluice-manager-leader-election")
		dep := typed[appsv1.Deployment](objs, "Deployment", "sluice-manager")
		Expect(election.Namespace).To(Equal(dep.Namespace))
		Expect(election.Rules).To(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		}))
		for _, name := range []string{"sluice-manager", "sluice-manager-leader-election"} {
			var subjects []rbacv1.Subject
			if name == "sluice-manager" {
				subjects = typed[rbacv1.ClusterRoleBinding](objs, "ClusterRoleBinding", name).Subjects
			} else {
				subjects = typed[rbacv1.RoleBinding](objs, "RoleBinding", name).Subjects
			}
			Expect(subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount",
				Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: dep.Namespace}}), name)
		}
	})

	It("serve the manager's metrics over HTTPS on 8443 through a Service selecting the manager pod", func() {
		dep := typed[appsv1.Deployment](objs, "Deployment", "sluice-manager")
		pod := dep.Spec.Template
		Expect(pod.Spec.Containers).To(HaveLen(1))
		ctr := pod.Spec.Containers[0]
		Expect(flagValue(ctr.Args, "metrics-bind-address")).To(Equal(":8443"))
		Expect(ctr.Args).To(ContainElements("--leader-elect", "--health-probe-bind-address=:8081"))
		Expect(ctr.Args).NotTo(ContainElement(HavePrefix("--metrics-secure")), "HTTPS is the default")
		Expect(ctr.Ports).To(ConsistOf(
			corev1.ContainerPort{Name: "https", ContainerPort: 8443},
			corev1.ContainerPort{Name: "probes", ContainerPort: 8081},
		))

		svc := typed[corev1.Service](objs, "Service", "sluice-manager-metrics")
		Expect(svc.Namespace).To(Equal(dep.Namespace))
		// A ServiceMonitor selects the Service by these labels (docs/OPERATIONS.md#manager-metrics).
		Expect(svc.Labels).To(Equal(dep.Labels))
		Expect(svc.Spec.Selector).To(Equal(map[string]string{
			"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "manager",
		}))
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels))).To(BeTrue())
		Expect(svc.Spec.Ports).To(Equal([]corev1.ServicePort{{
			Name: "https", Port: 8443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https"),
		}}))
	})

	It("let the manager review scrapers' tokens and access, and leave the metrics reader role unbound", func() {
		auth := typed[rbacv1.ClusterRole](objs, "ClusterRole", "sluice-manager-metrics-auth")
		Expect(auth.Rules).To(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		}))
		binding := typed[rbacv1.ClusterRoleBinding](objs, "ClusterRoleBinding", "sluice-manager-metrics-auth")
		Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "sluice-manager-metrics-auth"}))
		dep := typed[appsv1.Deployment](objs, "Deployment", "sluice-manager")
		Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount",
			Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: dep.Namespace}}))

		reader := typed[rbacv1.ClusterRole](objs, "ClusterRole", "sluice-metrics-reader")
		Expect(reader.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
		for _, u := range objs {
			if u.GetKind() == "ClusterRoleBinding" || u.GetKind() == "RoleBinding" {
				ref, _, err := unstructured.NestedString(u.Object, "roleRef", "name")
				Expect(err).NotTo(HaveOccurred())
				Expect(ref).NotTo(Equal("sluice-metrics-reader"), "%s %s binds the metrics reader", u.GetKind(), u.GetName())
			}
		}
	})

	// The API server's Pod Security admission confirms what the checks above
	// read: the router pod breaks the restricted level only by hostNetwork
	// (it declares no port, so no host port is implied).
	It("meet the restricted Pod Security level apart from hostNetwork", func(ctx context.Context) {
		ds := typed[appsv1.DaemonSet](objs, "DaemonSet", "sluice-router")
		ns := newNamespace(ctx)
		nsObj := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
		Expect(k8sClient.Update(ctx, nsObj)).To(Succeed())
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sluice-router"},
		}))).To(Succeed())

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "router"}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
		err := k8sClient.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		// Exactly one violation, hostNetwork itself: with it the API server
		// would default each declared container port's hostPort, but none is
		// declared.
		Expect(err.Error()).To(HaveSuffix(`violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true)`))

		pod.Spec.HostNetwork = false
		pod.Spec.DNSPolicy = corev1.DNSClusterFirst
		Expect(k8sClient.Create(ctx, pod, client.DryRunAll)).To(Succeed())
	})
})

var _ = Describe("rendered manifests (kustomize build config/qualify)", func() {
	var objs []*unstructured.Unstructured
	BeforeEach(func() { objs = renderKustomization("qualify") })

	It("plan by default, on the node's network, non-root, read-only, without capabilities", func() {
		job := typed[batchv1.Job](objs, "Job", "sluice-qualify")
		pod := job.Spec.Template.Spec
		Expect(pod.Containers).To(HaveLen(1))
		args := pod.Containers[0].Args
		Expect(args).To(ContainElement("--plan"))
		Expect(args).NotTo(ContainElement("--execute"))
		Expect(flagValue(args, "out")).To(Equal(pod.Containers[0].VolumeMounts[0].MountPath))
		Expect(*job.Spec.BackoffLimit).To(BeZero())
		Expect(pod.HostNetwork).To(BeTrue())
		Expect(pod.NodeName).NotTo(BeEmpty())
		Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		Expect(pod.ServiceAccountName).To(Equal("sluice-qualify"))
		Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
		sc := pod.Containers[0].SecurityContext
		Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
		Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
	})

	It("grant exactly what qualification does to a tier, in the tier's namespace", func() {
		role := typed[rbacv1.ClusterRole](objs, "ClusterRole", "sluice-qualify")
		Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{{APIGroups: []string{"sluice.dev"}, Resources: []string{"replicatiers"},
			Verbs: []string{"get", "list", "watch", "patch"}}}))
		binding := typed[rbacv1.RoleBinding](objs, "RoleBinding", "sluice-qualify")
		Expect(binding.RoleRef.Kind).To(Equal("ClusterRole"))
		Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "sluice-qualify", Namespace: "sluice-router"}}))
		job := typed[batchv1.Job](objs, "Job", "sluice-qualify")
		tier := flagValue(job.Spec.Template.Spec.Containers[0].Args, "tier")
		Expect(tier).To(HavePrefix(binding.Namespace+"/"), "the binding's namespace is the tier's")
	})

	It("are accepted by the API server", func(ctx context.Context) {
		for _, u := range objs {
			if ns := u.GetNamespace(); ns != "" {
				Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}
		}
		for _, u := range objs {
			Expect(k8sClient.Create(ctx, u, client.DryRunAll)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
		}
	})
})

package envtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// helmRunner runs the helm `make bin/helm` builds in the repository root,
// with its own configuration, cache and data directories and the suite's
// kubeconfig.
type helmRunner struct {
	helm, home, kubeconfig string
}

func newHelmRunner() *helmRunner {
	helm, err := filepath.Abs(filepath.Join(repoRoot, "bin", "helm"))
	Expect(err).NotTo(HaveOccurred())
	_, err = os.Stat(helm)
	Expect(err).NotTo(HaveOccurred(), "helm is missing: run `make bin/helm`")
	dir := GinkgoT().TempDir()
	return &helmRunner{helm: helm, home: dir, kubeconfig: writeKubeconfig(dir, "admin.kubeconfig", "")}
}

// template runs `helm template sluice charts/sluice -n sluice-system` with
// args and returns the manifest.
func (h *helmRunner) template(ctx context.Context, args ...string) string {
	GinkgoHelper()
	args = append([]string{"template", "sluice", "charts/sluice", "-n", "sluice-system", "--kubeconfig", h.kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, h.helm, args...) //nolint:gosec // the repository's pinned helm with the spec's own arguments.
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"), "HELM_DATA_HOME="+filepath.Join(h.home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	Expect(cmd.Run()).To(Succeed(), "helm %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.String()
}

// chartSecretData returns the decoded data of the rendered Secret name.
func chartSecretData(manifest, name string) map[string]string {
	GinkgoHelper()
	for doc := range strings.SplitSeq(manifest, "\n---\n") {
		s := &corev1.Secret{}
		Expect(yaml.Unmarshal([]byte(doc), s)).To(Succeed())
		if s.Kind != "Secret" || s.Name != name {
			continue
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out
	}
	Fail("the chart rendered no Secret " + name)
	return nil
}

var _ = Describe("the Helm chart (charts/sluice)", func() {
	It("renders objects the API server accepts, with the default values and with every option", func(ctx context.Context) {
		h := newHelmRunner()
		kubectl := filepath.Join(assetsDir(), "kubectl")
		_, err := os.Stat(kubectl)
		Expect(err).NotTo(HaveOccurred(), "kubectl missing in %s: run `make envtest-bins`", assetsDir())
		k := &cli{kubectl: kubectl, kubeconfig: h.kubeconfig, path: os.Getenv("PATH")}

		// A server-side dry run does not create the namespaces it applies,
		// so the objects in them need the namespaces to exist: the
		// release's, the router's by default and the one of
		// all-options.yaml.
		for _, ns := range []string{"sluice-system", "sluice-router", "gpu-routers"} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		for name, args := range map[string][]string{
			"default values": nil,
			// No ServiceMonitor, PodMonitor or PrometheusRule: this API
			// server has no Prometheus Operator CRDs. test/helm checks what
			// they render.
			"every option": {"--values", "test/helm/testdata/all-options.yaml", "--set", "monitoring.serviceMonitor.enabled=false",
				"--set", "monitoring.podMonitor.enabled=false", "--set", "monitoring.prometheusRule.enabled=false"},
		} {
			By("applying the chart with " + name)
			manifest := filepath.Join(GinkgoT().TempDir(), "chart.yaml")
			Expect(os.WriteFile(manifest, []byte(h.template(ctx, append(args, "--include-crds")...)), 0o600)).To(Succeed())
			// --force-conflicts: other specs of this suite create some of
			// the same cluster-scoped objects (the router's binding, say)
			// with other values; the dry run checks that the API server
			// accepts the chart's objects, not who owns their fields.
			out := k.ok(ctx, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", manifest)
			for _, kind := range []string{"customresourcedefinition", "deployment.apps/sluice-manager", "daemonset.apps/sluice-router",
				"clusterrolebinding.rbac.authorization.k8s.io/sluice-router",
				"validatingadmissionpolicy.admissionregistration.k8s.io/sluice-router-own-node",
				"validatingadmissionpolicybinding.admissionregistration.k8s.io/sluice-router-own-node"} {
				Expect(out).To(ContainSubstring(kind), name)
			}
			// helm template asks no cluster: only a given admin token
			// renders its Secret.
			Expect(strings.Contains(out, "secret/sluice-router-admin-token")).To(Equal(name == "every option"), name)
		}
	})

	It("keeps the router Secrets' values found in the cluster (an upgrade), generates the missing ones, and generates none without a cluster", func(ctx context.Context) {
		h := newHelmRunner()
		ns := newNamespace(ctx)
		By("the API keys Secret of a first install")
		Expect(k8sClient.Create(ctx, &corev1.Secret{ //nolint:gosec // a test key.
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "sluice-router-api-keys",
				Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
				Annotations: map[string]string{"meta.helm.sh/release-name": "sluice", "meta.helm.sh/release-namespace": "sluice-system"},
			},
			Data: map[string][]byte{"keys": []byte("key-of-the-first-install\n")},
		})).To(Succeed())

		// --dry-run=server lets the chart's lookup read the cluster, as
		// helm install and upgrade do. --take-ownership: other specs create
		// cluster-wide objects of the same names (ClusterRole sluice-router)
		// without Helm's ownership metadata, which a dry-run install would
		// otherwise refuse.
		manifest := h.template(ctx, "--dry-run=server", "--take-ownership", "--set", "router.namespace="+ns,
			"--set", "router.createNamespace=false", "--show-only", "templates/router-secrets.yaml")
		Expect(chartSecretData(manifest, "sluice-router-api-keys")).To(Equal(map[string]string{"keys": "key-of-the-first-install\n"}))
		token := chartSecretData(manifest, "sluice-router-admin-token")["token"]
		Expect(token).To(MatchRegexp(`^[A-Za-z0-9]{48}\n$`), "no admin token in the cluster: a random one")

		By("with existingSecret values the cluster is asked, and no Secret is rendered")
		manifest = h.template(ctx, "--dry-run=server", "--take-ownership", "--set", "router.namespace="+ns,
			"--set", "router.createNamespace=false", "--set", "router.apiKeys.existingSecret=my-keys",
			"--set", "router.adminToken.existingSecret=my-token")
		Expect(manifest).NotTo(ContainSubstring("kind: Secret"))

		By("without a cluster (helm template) the same values render no Secret, so no random key")
		manifest = h.template(ctx, "--set", "router.namespace="+ns, "--set", "router.createNamespace=false")
		Expect(manifest).NotTo(ContainSubstring("kind: Secret"))
	})
})

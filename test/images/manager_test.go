//go:build images

package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// controlPlane starts an API server and etcd (the envtest binaries of
// $KUBEBUILDER_ASSETS) with the CRD installed, and returns an admin client
// and the path of a kubeconfig the containers' user can read.
func controlPlane(t *testing.T) (client.Client, string) {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the control plane (KUBEBUILDER_ASSETS=%q): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := sluicev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := env.AddUser(envtest.User{Name: "image-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := sharedDir(t)
	writeShared(t, dir, "kubeconfig", string(kubeconfig))
	return c, filepath.Join(dir, "kubeconfig")
}

// TestManagerImageAcceptsTier runs the manager image unprivileged, with a
// read-only root filesystem and its shipped flags (leader election, HTTPS
// metrics with a generated certificate), against a real API server, and
// sees a ReplicaTier become Accepted.
func TestManagerImageAcceptsTier(t *testing.T) {
	c, kubeconfig := controlPlane(t)
	probePort, metricsPort := freePort(t), freePort(t)
	start(t, "manager", imgManager, []string{filepath.Dir(kubeconfig) + ":/etc/sluice/kube:ro"},
		"--kubeconfig=/etc/sluice/kube/kubeconfig",
		"--leader-elect", "--leader-election-namespace=default",
		"--metrics-bind-address=127.0.0.1:"+metricsPort,
		"--health-probe-bind-address=127.0.0.1:"+probePort)
	await(t, "manager ready", func() bool {
		code, _ := get("http://127.0.0.1:" + probePort + "/readyz")
		return code == 200
	})

	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	tier := &sluicev1.ReplicaTier{
		ObjectMeta: metav1.ObjectMeta{Name: "image-tier", Namespace: "default"},
		Spec: sluicev1.ReplicaTierSpec{
			NodeName:    "image-node",
			Aliases:     []string{"chat"},
			ServedModel: "served-model",
			Members: []sluicev1.Member{
				{ID: "gpu0", Endpoint: "http://127.0.0.1:8001", MaxConcurrency: ptr.To[int32](2)},
				{ID: "gpu1", Endpoint: "http://127.0.0.1:8002", MaxConcurrency: ptr.To[int32](2)},
			},
		},
	}
	if err := c.Create(ctx, tier); err != nil {
		t.Fatal(err)
	}
	await(t, "tier Accepted", func() bool {
		got := &sluicev1.ReplicaTier{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tier), got); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, string(sluicev1.ConditionAccepted))
	})
}

// TestDeploy runs `make deploy`'s script against a real API server: it
// installs config/default with the images it is given and creates the
// router's Secrets, a second run keeps the Secrets it made, and
// `make undeploy` removes what it installed.
func TestDeploy(t *testing.T) {
	_, kubeconfig := controlPlane(t)
	kubectl, err := filepath.Abs(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failSafe)
	defer cancel()
	k := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...) //nolint:gosec // the test's own kubectl.
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	deploy := func() {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join("..", "..", "hack", "deploy.sh"), "registry.example:5000/sluice-manager:v9", "registry.example:5000/sluice-router@sha256:"+strings.Repeat("ab", 32)) //nolint:gosec // the repository's script.
		cmd.Env = append(os.Environ(), "KUBECTL="+kubectl, "KUBECONFIG="+kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("deploy.sh: %v\n%s", err, out)
		}
	}
	deploy()
	if got := k("-n", "sluice-system", "get", "deployment", "sluice-manager", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != "registry.example:5000/sluice-manager:v9" {
		t.Errorf("manager image %q", got)
	}
	if got := k("-n", "sluice-router", "get", "daemonset", "sluice-router", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != "registry.example:5000/sluice-router@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("router image %q", got)
	}
	keys := k("-n", "sluice-router", "get", "secret", "sluice-router-api-keys", "-o", "jsonpath={.data.keys}")
	token := k("-n", "sluice-router", "get", "secret", "sluice-router-admin-token", "-o", "jsonpath={.data.token}")
	if len(keys) < 40 || len(token) < 40 || keys == token {
		t.Fatalf("generated Secrets: keys %q, token %q", keys, token)
	}
	deploy()
	if again := k("-n", "sluice-router", "get", "secret", "sluice-router-api-keys", "-o", "jsonpath={.data.keys}"); again != keys {
		t.Fatal("a second deploy replaced the API keys")
	}

	// make undeploy removes the cluster-scoped objects, the CRD included,
	// and the Secrets. (The namespaced objects go with their namespaces,
	// which this control plane, without a namespace controller, leaves
	// Terminating.)
	undeploy := exec.CommandContext(ctx, "make", "-C", filepath.Join("..", ".."), "undeploy", "KUBECTL="+kubectl) //nolint:gosec // the repository's Makefile.
	undeploy.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if out, err := undeploy.CombinedOutput(); err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	for _, gone := range [][]string{
		{"get", "crd", "replicatiers.sluice.dev"},
		{"get", "clusterrole", "sluice-manager"},
		{"get", "clusterrolebinding", "sluice-router"},
		{"-n", "sluice-router", "get", "secret", "sluice-router-api-keys"},
	} {
		// The CRD's deletion ends once the API server removed its objects.
		await(t, "after make undeploy, kubectl "+strings.Join(gone, " ")+" says NotFound", func() bool {
			out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, gone...)...).CombinedOutput() //nolint:gosec // see k.
			return err != nil && strings.Contains(string(out), "NotFound")
		})
	}
}

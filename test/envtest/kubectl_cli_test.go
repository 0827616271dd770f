package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// buildBinary builds one of the repository's commands into dir.
func buildBinary(ctx context.Context, dir, pkg string) string {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./"+pkg) //nolint:gosec // the test builds the repository's own commands.
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Run()).To(Succeed(), "go build %s", pkg)
	return out
}

// writeKubeconfig writes the suite's admin kubeconfig to dir and, when
// impersonate is set, a variant acting as that user with groups.
func writeKubeconfig(dir, name, impersonate string, groups ...string) string {
	c, err := clientcmd.Load(testEnv.KubeConfig)
	Expect(err).NotTo(HaveOccurred())
	if impersonate != "" {
		for _, ai := range c.AuthInfos {
			ai.Impersonate, ai.ImpersonateGroups = impersonate, groups
		}
	}
	path := filepath.Join(dir, name)
	Expect(clientcmd.WriteToFile(*c, path)).To(Succeed())
	return path
}

// cli runs kubectl with the admin kubeconfig and the plugin on PATH.
type cli struct {
	kubectl    string // the kubectl `make envtest-bins` built, of the API server's version.
	kubeconfig string
	path       string // PATH with the plugin's directory first.
}

// run runs kubectl args with $KUBECONFIG set (kubectl refuses flags before
// a plugin's name) and returns stdout, stderr and the error.
func (c *cli) run(ctx context.Context, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, c.kubectl, args...) //nolint:gosec // the spec's own kubectl arguments.
	cmd.Env = append(os.Environ(), "PATH="+c.path, "KUBECONFIG="+c.kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	GinkgoWriter.Printf("$ kubectl %s\n%s\n%s\n", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), err
}

// ok runs kubectl args, expects success and returns stdout.
func (c *cli) ok(ctx context.Context, args ...string) string {
	GinkgoHelper()
	out, stderr, err := c.run(ctx, args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, stderr)
	return out
}

// pluginStatus is `kubectl sluice status TIER -o json`, decoded.
type pluginStatus struct {
	Generation        int64  `json:"generation"`
	AppliedGeneration *int64 `json:"appliedGeneration"`
	TierQuiesce       string `json:"tierQuiesce"`
	Members           []struct {
		ID      string `json:"id"`
		Quiesce string `json:"quiesce"`
		Phase   string `json:"phase"`
	} `json:"members"`
}

// phases formats a plugin status as "GEN/APPLIED id=phase(quiesce) ...".
func (s pluginStatus) phases() string {
	applied := "none"
	if s.AppliedGeneration != nil {
		applied = fmt.Sprint(*s.AppliedGeneration)
	}
	out := fmt.Sprintf("%d/%s", s.Generation, applied)
	for _, m := range s.Members {
		out += fmt.Sprintf(" %s=%s(%s)", m.ID, m.Phase, m.Quiesce)
	}
	return out
}

var _ = Describe("kubectl and the kubectl-sluice plugin", func() {
	It("apply the samples, quiesce with patch, wait for Drained, and drain, readmit and show status with the plugin", func(ctx context.Context) {
		kubectl := filepath.Join(assetsDir(), "kubectl")
		_, err := os.Stat(kubectl)
		Expect(err).NotTo(HaveOccurred(), "kubectl missing in %s: run `make envtest-bins`", assetsDir())
		dir := GinkgoT().TempDir()
		buildBinary(ctx, dir, "cmd/kubectl-sluice")
		routerBin := buildBinary(ctx, dir, "cmd/router")
		installRouterRBAC(ctx)
		k := &cli{
			kubectl:    kubectl,
			kubeconfig: writeKubeconfig(dir, "admin.kubeconfig", ""),
			path:       dir + string(os.PathListSeparator) + os.Getenv("PATH"),
		}

		By("running the router binary for gpu-node-1 as its service account (kube mode)")
		routerKubeconfig := writeKubeconfig(dir, "router.kubeconfig", routerServiceAccount,
			"system:serviceaccounts", "system:serviceaccounts:sluice-router", "system:authenticated")
		router := exec.Command(routerBin, "--kubeconfig", routerKubeconfig, "--node-name", "gpu-node-1", //nolint:gosec // the binary the test built.
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
		router.Stdout, router.Stderr = GinkgoWriter, GinkgoWriter
		Expect(router.Start()).To(Succeed())
		DeferCleanup(func() {
			Expect(router.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(router.Wait()).To(Succeed())
		})

		By("kubectl apply -f config/samples/")
		out := k.ok(ctx, "apply", "-f", filepath.Join(repoRoot, "config", "samples")+"/")
		Expect(out).To(ContainSubstring("replicatier.sluice.dev/llama-70b created"))
		DeferCleanup(func(ctx context.Context) {
			k.ok(ctx, "delete", "-f", filepath.Join(repoRoot, "config", "samples")+"/", "--wait=true")
		})
		k.ok(ctx, "wait", "replicatier/llama-70b", "--for=jsonpath={.status.router.appliedGeneration}=1", "--timeout=60s")

		By("kubectl patch to quiesce gpu1, then kubectl wait for Drained")
		k.ok(ctx, "patch", "replicatier", "llama-70b", "--type", "merge", "-p", `{"spec":{"quiesce":{"members":{"gpu1":"maintenance"}}}}`)
		k.ok(ctx, "wait", "replicatier/llama-70b", `--for=jsonpath={.status.members[?(@.id=="gpu1")].phase}=Drained`, "--timeout=60s")

		status := func(tier string, extra ...string) pluginStatus {
			GinkgoHelper()
			var s pluginStatus
			Expect(json.Unmarshal([]byte(k.ok(ctx, append([]string{"sluice", "status", tier, "-o", "json"}, extra...)...)), &s)).To(Succeed())
			return s
		}

		By("kubectl sluice drain of a member: quiesces it and waits")
		out = k.ok(ctx, "sluice", "drain", "llama-70b", "--member", "gpu0", "--timeout", "60s")
		Expect(out).To(ContainSubstring("replicatier.sluice.dev/llama-70b member gpu0 drained"))
		// The samples' engines do not exist, so readiness is whatever the
		// router's probes find on those loopback ports.
		Expect(out).To(MatchRegexp(`gpu0 +(true|false) +Drained +drain`))
		Expect(status("llama-70b").phases()).To(Equal("3/3 gpu0=Drained(drain) gpu1=Drained(maintenance)"))

		By("kubectl sluice readmit of a member leaves the other member's intent")
		out = k.ok(ctx, "sluice", "readmit", "llama-70b", "--member", "gpu0", "-n", "default", "--kubeconfig", k.kubeconfig)
		Expect(out).To(ContainSubstring("member gpu0 readmitted"))
		Eventually(func() string { return status("llama-70b").phases() }).WithTimeout(routerTimeout).WithPolling(time.Second).
			Should(Equal("4/4 gpu0=Admitting() gpu1=Drained(maintenance)"))

		By("kubectl sluice drain and readmit of a whole tier")
		out = k.ok(ctx, "sluice", "drain", "qwen-7b", "--timeout", "60s")
		Expect(out).To(ContainSubstring("replicatier.sluice.dev/qwen-7b drained"))
		s := status("qwen-7b")
		Expect(s.TierQuiesce).To(Equal("drain"))
		Expect(s.phases()).To(Equal("2/2 gpu2=Drained() gpu3=Drained() gpu4=Drained()"))
		Expect(k.ok(ctx, "sluice", "readmit", "qwen-7b")).To(ContainSubstring("qwen-7b readmitted"))
		Eventually(func() string { return status("qwen-7b").phases() }).WithTimeout(routerTimeout).WithPolling(time.Second).
			Should(Equal("3/3 gpu2=Admitting() gpu3=Admitting() gpu4=Admitting()"))

		By("refusing member operations on a direct tier and unknown members, before any change")
		_, stderr, err := k.run(ctx, "sluice", "quiesce", "embed", "--member", "cpu0", "--reason", "maintenance")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring("embed has one member"))
		_, stderr, err = k.run(ctx, "sluice", "drain", "llama-70b", "--member", "gpu9")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring(`has no member "gpu9"`))
		Expect(k.ok(ctx, "get", "replicatier", "embed", "-o", "jsonpath={.metadata.generation}")).To(Equal("1"))
		Expect(k.ok(ctx, "get", "replicatier", "llama-70b", "-o", "jsonpath={.metadata.generation}")).To(Equal("4"))

		By("a server-side dry run changes nothing")
		out = k.ok(ctx, "sluice", "quiesce", "llama-70b", "--member", "gpu0", "--reason", "test", "--dry-run=server")
		Expect(out).To(ContainSubstring("(server dry run)"))
		Expect(k.ok(ctx, "get", "replicatier", "llama-70b", "-o", "jsonpath={.metadata.generation}")).To(Equal("4"))

		By("kubectl sluice status as a table, and -n choosing the namespace")
		Eventually(func() string { return k.ok(ctx, "sluice", "status", "llama-70b") }).WithTimeout(routerTimeout).WithPolling(time.Second).
			Should(MatchRegexp(`default/llama-70b +gpu-node-1 +Capacity +4 +4 +True +True +(True|False) +-`))
		Expect(k.ok(ctx, "sluice", "status", "llama-70b")).To(MatchRegexp(`gpu1 +(true|false) +Drained +maintenance`))
		_, stderr, err = k.run(ctx, "sluice", "status", "llama-70b", "-n", "kube-system")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring("replicatier not found: kube-system/llama-70b"))
	})
})

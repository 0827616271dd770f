package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// mcpAgentVerbs are the verbs on replicatiers docs/MCP.md says the MCP
// server's user needs; the spec grants exactly these.
var mcpAgentVerbs = []string{"get", "list", "watch", "patch"}

// grantTiers gives user the verbs on replicatiers in ns with a Role and a
// RoleBinding.
func grantTiers(ctx context.Context, ns, user string, verbs ...string) {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{sluicev1.GroupVersion.Group}, Resources: []string{"replicatiers"}, Verbs: verbs}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
}

// startMCP starts the built plugin's `mcp` with args and returns an MCP
// client session over its stdin and stdout; the process's stderr (its log)
// goes to the spec's output. The session is closed, and the process waited
// for, when the spec ends.
func startMCP(ctx context.Context, plugin string, args ...string) *mcp.ClientSession {
	// The process outlives the spec's context until the cleanup below
	// closes the session; procCtx only kills it if that cleanup fails.
	procCtx, kill := context.WithCancel(context.Background())
	DeferCleanup(kill)
	cmd := exec.CommandContext(procCtx, plugin, append([]string{"mcp"}, args...)...) //nolint:gosec // the binary the spec built.
	cmd.Stderr = GinkgoWriter
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "envtest", Version: "v0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(cs.Close()).To(Succeed())
		Expect(cmd.ProcessState).NotTo(BeNil(), "the server is still running")
		Expect(cmd.ProcessState.Success()).To(BeTrue(), "the server exited with %v", cmd.ProcessState)
	})
	return cs
}

// mcpCall calls tool with args and returns the result's text and
// structured content; a protocol error fails the spec.
func mcpCall(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (res *mcp.CallToolResult, text, structured string) {
	GinkgoHelper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	Expect(err).NotTo(HaveOccurred(), "%s %v: protocol error", tool, args)
	Expect(res.Content).To(HaveLen(1))
	tc, ok := res.Content[0].(*mcp.TextContent)
	Expect(ok).To(BeTrue())
	raw, err := json.Marshal(res.StructuredContent)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("%s %v -> isError=%v %s\n%s\n", tool, args, res.IsError, tc.Text, raw)
	return res, tc.Text, string(raw)
}

// mcpTransition is member_transition's structured result, decoded.
type mcpTransition struct {
	Outcome string `json:"outcome"`
	DryRun  bool   `json:"dryRun"`
	Message string `json:"message"`
	Status  struct {
		Generation        int64  `json:"generation"`
		AppliedGeneration *int64 `json:"appliedGeneration"`
		Members           []struct {
			ID      string `json:"id"`
			Phase   string `json:"phase"`
			Quiesce string `json:"quiesce"`
		} `json:"members"`
	} `json:"status"`
}

// transition calls member_transition with args, expects a result (not a
// tool error) and decodes it.
func transition(ctx context.Context, cs *mcp.ClientSession, args map[string]any) mcpTransition {
	GinkgoHelper()
	res, text, raw := mcpCall(ctx, cs, "member_transition", args)
	Expect(res.IsError).To(BeFalse(), text)
	Expect(raw).NotTo(ContainSubstring("127.0.0.1"), "a result shows an endpoint")
	var out mcpTransition
	Expect(json.Unmarshal([]byte(raw), &out)).To(Succeed())
	return out
}

// phases formats a member_transition status as "GEN/APPLIED
// id=phase(quiesce) ...", for Eventually.
func (t mcpTransition) phases() string {
	applied := "none"
	if a := t.Status.AppliedGeneration; a != nil {
		applied = fmt.Sprint(*a)
	}
	out := fmt.Sprintf("%d/%s", t.Status.Generation, applied)
	for _, m := range t.Status.Members {
		out += fmt.Sprintf(" %s=%s(%s)", m.ID, m.Phase, m.Quiesce)
	}
	return out
}

// holdOneOn sends requests for alias until one is held in flight on
// engine, and returns the channel its reply arrives on and the release.
func holdOneOn(r *testRouter, alias string, engine *testEngine) (<-chan reply, func()) {
	arrived, release := engine.holdNext()
	held := make(chan reply, 1)
	for {
		done := make(chan reply, 1)
		go func() {
			defer GinkgoRecover()
			done <- r.chat(alias)
		}()
		select {
		case <-arrived:
			go func() { held <- <-done }()
			return held, release
		case rep := <-done:
			Expect(rep.status).To(Equal(http.StatusOK))
		}
	}
}

var _ = Describe("kubectl sluice mcp", func() {
	It("serves the tools over stdio with the user's RBAC: quiesce shows Draining then Drained, a dry run and malformed arguments change nothing", func(ctx context.Context) {
		dir := GinkgoT().TempDir()
		plugin := buildBinary(ctx, dir, "cmd/kubectl-sluice")
		saCfg := installRouterRBAC(ctx)
		ns := newNamespace(ctx)
		node := "node-" + ns
		gpu0, gpu1 := newTestEngine(), newTestEngine()
		t := capacityTier(ns, "llama", node, "llama-"+ns, gpu0, gpu1)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		r := startRouter(saCfg, node)
		alias := t.Spec.Aliases[0]
		servedBy(r, alias, "gpu0", "gpu1")
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=1/1 gpu0=Admitting/true gpu1=Admitting/true"))
		resourceVersion := func() string { return get(ctx, t).ResourceVersion }

		By("starting the built plugin's mcp as a user holding only the Role docs/MCP.md names")
		grantTiers(ctx, ns, "mcp-agent", mcpAgentVerbs...)
		agent := writeKubeconfig(dir, "agent.kubeconfig", "mcp-agent", "system:authenticated")
		cs := startMCP(ctx, plugin, "--kubeconfig", agent, "-n", ns)

		By("listing the tools: two, with closed input schemas")
		tools, err := cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(tools.Tools).To(HaveLen(2))
		for i, name := range []string{"list_tiers", "member_transition"} {
			Expect(tools.Tools[i].Name).To(Equal(name))
			Expect(tools.Tools[i].InputSchema).To(HaveKeyWithValue("additionalProperties", false))
		}

		By("list_tiers in the kubeconfig's namespace, without endpoints")
		res, text, raw := mcpCall(ctx, cs, "list_tiers", map[string]any{})
		Expect(res.IsError).To(BeFalse(), text)
		Expect(text).To(Equal("1 tiers in namespace " + ns + ": llama"))
		Expect(raw).To(ContainSubstring(`"memberCount":2`))
		Expect(raw).NotTo(ContainSubstring("127.0.0.1"))

		By("quiescing gpu1 while a request is in flight on it: Draining, then Drained once it finishes")
		held, release := holdOneOn(r, alias, gpu1)
		out := transition(ctx, cs, map[string]any{"action": "quiesce", "tier": ns + "/llama", "member": "gpu1", "reason": "maintenance"})
		Expect(out.Outcome).To(Equal("changed"))
		Expect(out.Message).To(Equal("replicatier.sluice.dev/llama member gpu1 quiesced (maintenance)"))
		status := func() string {
			return transition(ctx, cs, map[string]any{"action": "status", "tier": ns + "/llama"}).phases()
		}
		Eventually(status).WithTimeout(routerTimeout).WithPolling(routerPoll).
			Should(Equal("2/2 gpu0=Admitting() gpu1=Draining(maintenance)"))
		release()
		Eventually(held).WithTimeout(routerTimeout).Should(Receive(Equal(reply{status: http.StatusOK, member: "gpu1"})))
		Eventually(status).WithTimeout(routerTimeout).WithPolling(routerPoll).
			Should(Equal("2/2 gpu0=Admitting() gpu1=Drained(maintenance)"))

		By("a dry-run readmit: the server-side dry run stores nothing")
		rv := resourceVersion()
		out = transition(ctx, cs, map[string]any{"action": "readmit", "tier": ns + "/llama", "member": "gpu1", "dry_run": true})
		Expect(out.Outcome).To(Equal("changed"))
		Expect(out.DryRun).To(BeTrue())
		Expect(out.Message).To(Equal("replicatier.sluice.dev/llama member gpu1 readmitted (server dry run)"))
		Expect(out.Status.Members).To(HaveLen(1))
		Expect(out.Status.Members[0].Quiesce).To(BeEmpty(), "the dry run's answer is the tier as it would be")
		Expect(resourceVersion()).To(Equal(rv))
		Expect(get(ctx, t).Spec.Quiesce.Members).To(HaveKeyWithValue("gpu1", sluicev1.QuiesceReason("maintenance")))

		By("malformed arguments, an unknown member and a missing tier: tool errors that change nothing")
		for _, bad := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"action": "readmit", "tier": ns + "/llama", "member": "gpu1", "force": true}, `unexpected additional properties ["force"]`},
			{map[string]any{"action": "readmit", "member": "gpu1"}, `missing properties: ["tier"]`},
			{map[string]any{"action": "readmit", "tier": ns + "/llama", "member": strings.Repeat("g", 200)}, "maxLength"},
			{map[string]any{"action": "readmit", "tier": ns + "/llama", "member": "gpü1"}, "pattern"},
			{map[string]any{"action": "readmit", "tier": ns + "/llama", "member": "gpu9"}, `tier ` + ns + `/llama has no member "gpu9" (members: gpu0, gpu1)`},
			{map[string]any{"action": "quiesce", "tier": ns + "/nope", "reason": "x"}, "replicatier not found: " + ns + "/nope"},
			{map[string]any{"action": "quiesce", "tier": ns + "/llama", "member": "gpu0"}, "quiesce needs a reason"},
		} {
			res, text, _ := mcpCall(ctx, cs, "member_transition", bad.args)
			Expect(res.IsError).To(BeTrue(), "%v", bad.args)
			Expect(text).To(ContainSubstring(bad.want))
			Expect(text).NotTo(ContainSubstring("https://"))
			Expect(resourceVersion()).To(Equal(rv), "%v changed the tier", bad.args)
		}

		By("readmitting gpu1")
		out = transition(ctx, cs, map[string]any{"action": "readmit", "tier": ns + "/llama", "member": "gpu1"})
		Expect(out.Outcome).To(Equal("changed"))
		Expect(resourceVersion()).NotTo(Equal(rv))
		Eventually(status).WithTimeout(routerTimeout).WithPolling(routerPoll).
			Should(Equal("3/3 gpu0=Admitting() gpu1=Admitting()"))
		servedBy(r, alias, "gpu0", "gpu1")

		By("draining gpu0 waits for the router's Drained")
		out = transition(ctx, cs, map[string]any{"action": "drain", "tier": ns + "/llama", "member": "gpu0", "timeout_seconds": 60})
		Expect(out.Outcome).To(Equal("drained"))
		Expect(out.phases()).To(Equal("4/4 gpu0=Drained(drain)"))

		By("a user without patch: list_tiers works, quiesce is a Forbidden tool error without URLs")
		grantTiers(ctx, ns, "mcp-viewer", "get", "list", "watch")
		viewer := startMCP(ctx, plugin, "--kubeconfig", writeKubeconfig(dir, "viewer.kubeconfig", "mcp-viewer", "system:authenticated"), "-n", ns)
		res, text, _ = mcpCall(ctx, viewer, "list_tiers", map[string]any{})
		Expect(res.IsError).To(BeFalse(), text)
		rv = resourceVersion()
		res, text, _ = mcpCall(ctx, viewer, "member_transition", map[string]any{"action": "readmit", "tier": ns + "/llama", "member": "gpu0"})
		Expect(res.IsError).To(BeTrue())
		Expect(text).To(HavePrefix("the API server refused the request (Forbidden):"))
		Expect(text).To(ContainSubstring(`User "mcp-viewer" cannot patch resource "replicatiers"`))
		Expect(text).NotTo(ContainSubstring("://"))
		Expect(resourceVersion()).To(Equal(rv))
	})
})

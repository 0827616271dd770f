package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/testproc"
)

// Names the test gives what it creates.
const (
	// nodeName is the router's node; every tier of the test is on it.
	nodeName = "install-node"
	// servedModel is the model the engines serve and the tiers require.
	servedModel = "install/llm"
	// tierNamespace holds the test's tiers.
	tierNamespace = "default"
	// apiKey is the router's front-door API key, from a file as in the
	// DaemonSet's Secret volume.
	apiKey = "install-api-key"
	// fiveTokens is enginesim's text for five output tokens
	// (docs/ENGINESIM.md: a fixed word sequence, one word per token).
	fiveTokens = "The quick brown fox jumps"
	// scraperNamespace and scraperName are the ServiceAccount that scrapes
	// the manager's metrics, as a Prometheus would.
	scraperNamespace = "monitoring"
	scraperName      = "prometheus"
)

// Waiting bounds.
const (
	// waitTimeout bounds every wait on the API server or a process; reached
	// only when the test fails.
	waitTimeout = 30 * time.Second
	// pollInterval is how often a wait checks its condition.
	pollInterval = 50 * time.Millisecond
	// httpTimeout bounds one HTTP call to a process.
	httpTimeout = 10 * time.Second
)

// fastEngine has enginesim answer in a few milliseconds.
var fastEngine = []string{"--ttft-base", "5ms", "--ttft-per-seq", "0s", "--itl-base", "1ms", "--itl-per-seq", "0s"}

// allowlist holds the grants of the shipped RBAC that the flow cannot use,
// by ServiceAccount user, each with the reason it is shipped anyway.
var allowlist = map[string]map[access]string{
	"system:serviceaccount:sluice-system:sluice-manager": {
		{Verb: "list", Group: "sluice.dev", Resource: "replicatiers"}: "controller-runtime's cache lists and watches in one " +
			"watch-list request; client-go falls back to a list when the API server does not serve watch-list " +
			"(WatchList disabled): client-go tools/cache/reflector.go, ListAndWatchWithContext",
	},
}

// installed is what the test learns from the rendered manifests and
// starts.
type installed struct {
	c    *cluster
	objs []*unstructured.Unstructured
	bins map[string]string
	// The programs' ServiceAccounts, from the Deployment and the DaemonSet.
	managerNS, managerSA, routerNS, routerSA string
	manager, router                          *supervise.Process
	routerFront                              string
	metricsAddr                              string
	engines                                  []string // base URLs
}

// TestInstall applies config/default to a real API server with audit
// logging, runs the built manager and router as their shipped
// ServiceAccounts with the shipped arguments, drives a tier through
// acceptance, routing and quiesce, and then proves from the audit log that
// the shipped RBAC is exactly what the programs use. Its last subtests
// remove one rule at a time and show the flow break.
func TestInstall(t *testing.T) {
	binDir := t.TempDir()
	built := make(chan struct{})
	var buildErr error
	in := &installed{}
	go func() {
		defer close(built)
		in.bins, buildErr = buildBinaries(binDir, "cmd/manager", "cmd/router", "cmd/enginesim")
	}()
	// The build writes into binDir: wait for it before the directory goes.
	t.Cleanup(func() { <-built })

	in.c = startCluster(t)
	in.objs = render(t, "default")
	dep := find[appsv1.Deployment](t, in.objs, "Deployment", "sluice-manager")
	ds := find[appsv1.DaemonSet](t, in.objs, "DaemonSet", "sluice-router")
	in.managerNS, in.managerSA = dep.Namespace, dep.Spec.Template.Spec.ServiceAccountName
	in.routerNS, in.routerSA = ds.Namespace, ds.Spec.Template.Spec.ServiceAccountName

	if !t.Run("manifests apply", in.applyManifests) {
		return
	}
	<-built
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if !t.Run("programs start as their ServiceAccounts", func(st *testing.T) {
		in.startPrograms(st, t, dep.Spec.Template.Spec.Containers, ds.Spec.Template.Spec.Containers)
	}) {
		return
	}
	if !t.Run("flow", func(st *testing.T) { in.flow(st, t) }) {
		return
	}
	var offset int64
	if !t.Run("least privilege", func(t *testing.T) { offset = in.leastPrivilege(t) }) {
		return
	}
	t.Run("without the router's status patch no tier is programmed", func(t *testing.T) {
		in.withoutRule(t, offset, "sluice-router", in.routerNS, in.routerSA, "llm-b",
			func(t *testing.T, tier *sluicev1.ReplicaTier) {
				// The manager accepts the tier: only the router's report is missing.
				in.awaitConditions(t, tier, sluicev1.ConditionAccepted)
				cur, err := in.get(t, tier)
				if err != nil {
					t.Fatal(err)
				}
				if cur.Status.Router != nil || meta.IsStatusConditionTrue(cur.Status.Conditions, string(sluicev1.ConditionProgrammed)) {
					t.Errorf("tier reported programmed without the router's status patch: %+v", cur.Status)
				}
			})
	})
	t.Run("without the manager's status patch no tier is accepted", func(t *testing.T) {
		in.withoutRule(t, offset, "sluice-manager", in.managerNS, in.managerSA, "llm-c",
			func(t *testing.T, tier *sluicev1.ReplicaTier) {
				if len(tier.Status.Conditions) > 0 || tier.Status.ObservedGeneration != 0 {
					t.Errorf("tier has a manager status without the manager's status patch: %+v", tier.Status)
				}
			})
	})
}

// applyManifests creates the manifests' namespaces (a server-side dry run
// cannot create them, and their namespaced objects need them), dry-runs
// config/default on the API server, applies it and checks every object is
// there.
func (in *installed) applyManifests(t *testing.T) {
	c := in.c
	for _, u := range in.objs {
		if u.GetKind() == "Namespace" {
			c.run(t, "create", "namespace", u.GetName())
		}
	}
	c.run(t, "apply", "--server-side", "--dry-run=server", "-k", "config/default")
	c.run(t, "apply", "--server-side", "-k", "config/default")
	c.run(t, "wait", "--for=condition=Established", "crd/replicatiers.sluice.dev", "--timeout=30s")
	for _, u := range in.objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.k8s.Get(t.Context(), client.ObjectKeyFromObject(u), live); err != nil {
			t.Errorf("%s %s after apply: %v", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	// The authorizer sees new bindings a moment after they are stored: the
	// programs start only once every grant is in force, so a request they
	// make at once is not forbidden by that lag.
	for _, sa := range [][2]string{{in.managerNS, in.managerSA}, {in.routerNS, in.routerSA}} {
		for _, g := range grantsOf(t, in.objs, sa[0], sa[1]) {
			user := serviceAccountUser(sa[0], sa[1])
			eventually(t, fmt.Sprintf("%s may %s", user, g), func() (bool, string) {
				return in.allowed(t, user, sa[0], g)
			})
		}
	}
}

// allowed asks the API server's authorizer, with a SubjectAccessReview,
// whether the ServiceAccount user of namespace may make request r (in
// namespace tierNamespace when r is a cluster-wide grant of a namespaced
// resource; cluster-scoped resources ignore it).
func (in *installed) allowed(t *testing.T, user, namespace string, r access) (bool, string) {
	t.Helper()
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if r.Path != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.Path, Verb: r.Verb}
	} else {
		res, sub, _ := strings.Cut(r.Resource, "/")
		ns := r.Namespace
		if ns == "" {
			ns = tierNamespace
		}
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Verb: r.Verb, Group: r.Group, Resource: res, Subresource: sub, Namespace: ns,
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: spec}
	if err := in.c.k8s.Create(context.WithoutCancel(t.Context()), sar); err != nil {
		return false, err.Error()
	}
	return sar.Status.Allowed, sar.Status.Reason
}

// startPrograms starts the manager and the router with the arguments of
// the shipped Deployment and DaemonSet, changing only what a process
// outside a pod needs: loopback addresses, a kubeconfig impersonating its
// ServiceAccount, the lease namespace, the node name and the Secret files.
// Both are stopped when the parent test ends (owner), not this subtest.
func (in *installed) startPrograms(t, owner *testing.T, managerCtrs, routerCtrs []corev1.Container) {
	if len(managerCtrs) != 1 || len(routerCtrs) != 1 {
		t.Fatalf("want one container each in the Deployment and the DaemonSet, got %d and %d", len(managerCtrs), len(routerCtrs))
	}
	c := in.c
	// The Secret files live as long as the router.
	secrets := owner.TempDir()
	keys, token := filepath.Join(secrets, "keys"), filepath.Join(secrets, "token")
	for path, v := range map[string]string{keys: apiKey + "\n", token: "install-admin-token\n"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	in.metricsAddr = freeLoopbackAddr(t)
	managerArgs := rewriteArgs(t, managerCtrs[0].Args, map[string]string{
		"metrics-bind-address":      in.metricsAddr,
		"health-probe-bind-address": freeLoopbackAddr(t),
	})
	managerArgs = append(managerArgs,
		"--kubeconfig="+c.serviceAccountKubeconfig(t, in.managerNS, in.managerSA, nil),
		// Outside a pod the manager cannot read its namespace.
		"--leader-election-namespace="+in.managerNS)
	// The manager's ports are chosen here, not by the kernel at bind time:
	// wait until it serves metrics (its probe port is bound before) so no
	// process started after it can take them.
	in.manager = testproc.Start(t, owner, "manager", in.bins["manager"], managerArgs, func(line []byte) bool {
		return bytes.Contains(line, []byte(`"msg":"Serving metrics server"`))
	})

	routerArgs := rewriteArgs(t, routerCtrs[0].Args, map[string]string{
		"listen":           "127.0.0.1:0",
		"admin-listen":     "127.0.0.1:0",
		"api-keys-file":    keys,
		"admin-token-file": token,
	})
	routerArgs = append(routerArgs,
		// The router pod's projected token names its node, which the
		// own-node admission policy of config/router requires of every
		// status write; impersonation carries it as the same user extra.
		"--kubeconfig="+c.serviceAccountKubeconfig(t, in.routerNS, in.routerSA,
			map[string][]string{"authentication.kubernetes.io/node-name": {nodeName}}),
		// The DaemonSet sets NODE_NAME from the downward API.
		"--node-name="+nodeName)
	var admin string
	in.router = testproc.Start(t, owner, "router", in.bins["router"], routerArgs, startlines.RouterAddrs(&in.routerFront, &admin))
	for _, a := range []string{in.routerFront, admin} {
		if host, _, err := net.SplitHostPort(a); err != nil || host != "127.0.0.1" {
			t.Fatalf("router listens on %q, not loopback", a)
		}
	}
	in.scrapeMetrics(t)
}

// rewriteArgs returns the shipped args with the value of each --name=value
// flag in set replaced; every flag of set must be among the args, so the
// processes never bind what the manifests bind in a pod.
func rewriteArgs(t *testing.T, args []string, set map[string]string) []string {
	t.Helper()
	out := slices.Clone(args)
	seen := map[string]bool{}
	for i, a := range out {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if v, known := set[name]; ok && known {
			out[i] = "--" + name + "=" + v
			seen[name] = true
		}
	}
	for name := range set {
		if !seen[name] {
			t.Fatalf("the shipped args %q have no --%s=VALUE", args, name)
		}
	}
	return out
}

// freeLoopbackAddr returns a loopback address with a port nobody listens
// on, for the manager: it binds what its flags name, and logs the flag
// rather than the bound address.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// scrapeMetrics scrapes the manager's HTTPS metrics endpoint once with the
// token of a ServiceAccount bound to the shipped sluice-metrics-reader, so
// the manager reviews the token and the access with its own grants.
func (in *installed) scrapeMetrics(t *testing.T) {
	ctx := t.Context()
	c := in.c
	reader := find[rbacv1.ClusterRole](t, in.objs, "ClusterRole", "sluice-metrics-reader")
	c.run(t, "create", "namespace", scraperNamespace)
	c.run(t, "create", "serviceaccount", scraperName, "-n", scraperNamespace)
	c.run(t, "create", "clusterrolebinding", "install-metrics-reader", "--clusterrole="+reader.Name,
		"--serviceaccount="+scraperNamespace+":"+scraperName)
	// The endpoint caches a denial for 30 s: scrape only once the binding
	// is in the API server's authorizer.
	eventually(t, "the scraper may get /metrics", func() (bool, string) {
		return in.allowed(t, serviceAccountUser(scraperNamespace, scraperName), scraperNamespace, access{Verb: "get", Path: "/metrics"})
	})
	clientset, err := kubernetes.NewForConfig(c.adminConfig)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := clientset.CoreV1().ServiceAccounts(scraperNamespace).CreateToken(ctx, scraperName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	eventually(t, "a scrape of the manager's metrics", func() (bool, string) {
		code, body, err := scrape(ctx, in.metricsAddr, tr.Status.Token)
		if err != nil {
			return false, err.Error()
		}
		// controller-runtime's metrics and the manager's build.
		return code == http.StatusOK && strings.Contains(body, "controller_runtime_reconcile_total") &&
			strings.Contains(body, "\nsluice_build_info{"), fmt.Sprintf("status %d", code)
	})
}

// scrape GETs /metrics over TLS with a bearer token.
func scrape(ctx context.Context, addr, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // The endpoint's certificate is self-signed, as in a default install.
		MinVersion:         tls.VersionTLS12,
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// flow starts two engines, applies a tier of both on the router's node as
// the admin, waits until the manager accepted it and the router programmed
// it, routes a chat completion through the router's front door, then
// quiesces each member in turn with kubectl patch until the router reports
// it Drained, and readmits both with one patch.
func (in *installed) flow(t, owner *testing.T) {
	for i := range 2 {
		var addr string
		testproc.Start(t, owner, fmt.Sprintf("engine-%d", i), in.bins["enginesim"],
			append([]string{"--listen", "127.0.0.1:0", "--model", servedModel}, fastEngine...), startlines.EngineAddr(&addr))
		in.engines = append(in.engines, "http://"+addr)
	}
	tier := in.applyTier(t, "llm", "install-llm")
	in.awaitConditions(t, tier, sluicev1.ConditionAccepted, sluicev1.ConditionProgrammed, sluicev1.ConditionReady)

	code, member, body := chat(t, in.routerFront, "install-llm")
	if code != http.StatusOK || !strings.Contains(body, fiveTokens) || (member != "m0" && member != "m1") {
		t.Fatalf("chat completion through the router: status %d, member %q, body %s", code, member, body)
	}

	in.patch(t, tier, `{"spec":{"quiesce":{"members":{"m0":"maintenance"}}}}`)
	in.awaitPhases(t, tier, map[string]sluicev1.MemberPhase{"m0": sluicev1.MemberDrained, "m1": sluicev1.MemberAdmitting})
	in.patch(t, tier, `{"spec":{"quiesce":{"members":{"m1":"maintenance"}}}}`)
	in.awaitPhases(t, tier, map[string]sluicev1.MemberPhase{"m0": sluicev1.MemberDrained, "m1": sluicev1.MemberDrained})
	// Readmitting both members at once has the manager record two
	// isomorphic Readmitted events, the second as a series: its events
	// patch.
	in.patch(t, tier, `{"spec":{"quiesce":null}}`)
	in.awaitPhases(t, tier, map[string]sluicev1.MemberPhase{"m0": sluicev1.MemberAdmitting, "m1": sluicev1.MemberAdmitting})
}

// applyTier applies, as the admin with kubectl, a tier of the two engines
// on the router's node.
func (in *installed) applyTier(t *testing.T, name, alias string) *sluicev1.ReplicaTier {
	t.Helper()
	rt := &sluicev1.ReplicaTier{}
	rt.APIVersion, rt.Kind = "sluice.dev/v1alpha1", "ReplicaTier"
	rt.Name, rt.Namespace = name, tierNamespace
	rt.Spec.NodeName = nodeName
	rt.Spec.Aliases = []string{alias}
	rt.Spec.ServedModel = servedModel
	rt.Spec.Strategy = sluicev1.StrategyCapacity
	for i, url := range in.engines {
		rt.Spec.Members = append(rt.Spec.Members, sluicev1.Member{
			ID: fmt.Sprintf("m%d", i), Endpoint: url, MaxConcurrency: ptr.To[int32](4),
			Metrics: &sluicev1.MetricsSpec{Engine: "vllm"},
		})
	}
	raw, err := yaml.Marshal(rt)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	in.c.run(t, "apply", "-f", abs)
	return rt
}

// patch merge-patches the tier's spec as the admin with kubectl.
func (in *installed) patch(t *testing.T, tier *sluicev1.ReplicaTier, patch string) {
	t.Helper()
	in.c.run(t, "patch", "replicatier", tier.Name, "-n", tier.Namespace, "--type=merge", "-p", patch)
}

// get reads the tier as the admin.
func (in *installed) get(t *testing.T, tier *sluicev1.ReplicaTier) (*sluicev1.ReplicaTier, error) {
	t.Helper()
	cur := &sluicev1.ReplicaTier{}
	err := in.c.k8s.Get(t.Context(), client.ObjectKeyFromObject(tier), cur)
	return cur, err
}

// awaitConditions waits until each condition is True on the tier's
// current generation.
func (in *installed) awaitConditions(t *testing.T, tier *sluicev1.ReplicaTier, conds ...sluicev1.ConditionType) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s %v", tier.Name, conds), func() (bool, string) {
		cur, err := in.get(t, tier)
		if err != nil {
			return false, err.Error()
		}
		for _, ct := range conds {
			c := meta.FindStatusCondition(cur.Status.Conditions, string(ct))
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != cur.Generation {
				return false, fmt.Sprintf("conditions %+v", cur.Status.Conditions)
			}
		}
		return true, ""
	})
}

// awaitPhases waits until the router reports the members' phases in
// status, for the tier's current generation.
func (in *installed) awaitPhases(t *testing.T, tier *sluicev1.ReplicaTier, want map[string]sluicev1.MemberPhase) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s phases %v", tier.Name, want), func() (bool, string) {
		cur, err := in.get(t, tier)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]sluicev1.MemberPhase{}
		for _, m := range cur.Status.Members {
			got[m.ID] = m.Phase
		}
		applied := cur.Status.Router != nil && cur.Status.Router.AppliedGeneration == cur.Generation
		return applied && fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("router %+v members %v", cur.Status.Router, got)
	})
}

// chat posts a five-token chat completion for model to the router's front
// door with the API key and returns the status, the member that served it
// and the body.
func chat(t *testing.T, front, model string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), httpTimeout)
	defer cancel()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"say something"}],"max_tokens":5}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+front+"/v1/chat/completions", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("chat completion: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Sluice-Member"), string(b)
}

// leastPrivilege reads the audit log and checks, for the manager's and the
// router's ServiceAccounts, that every grant of the shipped RBAC was used
// (waiting for the asynchronous ones: lease renewal, event series) and
// that no request was forbidden. It returns the audit log's size at the
// check, where the next subtests' requests begin.
func (in *installed) leastPrivilege(t *testing.T) int64 {
	type identity struct {
		user   string
		grants []access
	}
	ids := []identity{
		{serviceAccountUser(in.managerNS, in.managerSA), grantsOf(t, in.objs, in.managerNS, in.managerSA)},
		{serviceAccountUser(in.routerNS, in.routerSA), grantsOf(t, in.objs, in.routerNS, in.routerSA)},
	}
	for _, id := range ids {
		if len(id.grants) == 0 {
			t.Fatalf("the shipped RBAC grants %s nothing", id.user)
		}
	}
	// A program that exited would make fewer requests than it needs.
	for _, p := range []*supervise.Process{in.manager, in.router} {
		if !p.Running() {
			t.Fatalf("%s exited during the flow", p.Name())
		}
	}
	var reqs map[string][]request
	var size int64
	// Not fatal: a missing permission below is reported too.
	if ok, why := poll(func() (bool, string) {
		reqs, size = readAudit(t, in.c.auditLog, 0)
		var extra []string
		for _, id := range ids {
			for _, g := range unused(id.grants, reqs[id.user], allowlist[id.user]) {
				extra = append(extra, id.user+": "+g)
			}
		}
		return len(extra) == 0, strings.Join(extra, "\n")
	}); !ok {
		t.Errorf("extra permissions: granted by the shipped RBAC but not used within %v:\n%s", waitTimeout, why)
	}
	for _, id := range ids {
		if f := forbidden(reqs[id.user]); len(f) > 0 {
			t.Errorf("%s misses permissions; forbidden:\n%s", id.user, strings.Join(f, "\n"))
		}
		t.Logf("%s requested:\n%s", id.user, summary(reqs[id.user]))
	}
	// An allowlist entry names a grant that is shipped, with a reason.
	for user, entries := range allowlist {
		i := slices.IndexFunc(ids, func(id identity) bool { return id.user == user })
		for g, why := range entries {
			if i < 0 || !slices.Contains(ids[i].grants, g) || why == "" {
				t.Errorf("allowlist entry %s: %s is not a shipped grant with a reason", user, g)
			}
		}
	}
	return size
}

// withoutRule removes patch on replicatiers/status from the live
// ClusterRole role, applies a tier, waits until the audit log (from offset
// on) shows the ServiceAccount namespace/name's status patch of that tier
// forbidden, and runs check on the tier: what the flow lacks without the
// rule. The rule is restored when the subtest ends.
func (in *installed) withoutRule(t *testing.T, offset int64, role, namespace, name, tierName string, check func(*testing.T, *sluicev1.ReplicaTier)) {
	user := serviceAccountUser(namespace, name)
	ctx := t.Context()
	c := in.c
	removed := access{Verb: "patch", Group: sluicev1.GroupVersion.Group, Resource: "replicatiers/status"}
	live := &rbacv1.ClusterRole{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Name: role}, live); err != nil {
		t.Fatal(err)
	}
	original := slices.Clone(live.Rules)
	var rules []rbacv1.PolicyRule
	for _, r := range live.Rules {
		if slices.Equal(r.APIGroups, []string{removed.Group}) && slices.Equal(r.Resources, []string{removed.Resource}) {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == removed.Verb })
			if len(r.Verbs) == 0 {
				continue
			}
		}
		rules = append(rules, r)
	}
	if len(rules) == len(original) && slices.EqualFunc(rules, original, func(a, b rbacv1.PolicyRule) bool { return slices.Equal(a.Verbs, b.Verbs) }) {
		t.Fatalf("ClusterRole %s has no rule %s", role, removed)
	}
	setRules := func(rules []rbacv1.PolicyRule, allowed bool) {
		t.Helper()
		cur := &rbacv1.ClusterRole{}
		if err := c.k8s.Get(context.WithoutCancel(ctx), client.ObjectKey{Name: role}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Rules = rules
		if err := c.k8s.Update(context.WithoutCancel(ctx), cur); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("%s may %s: %v", user, removed, allowed), func() (bool, string) {
			ok, why := in.allowed(t, user, namespace, removed)
			return ok == allowed, why
		})
	}
	setRules(rules, false)
	t.Cleanup(func() { setRules(original, true) })

	tier := in.applyTier(t, tierName, "install-"+tierName)
	eventually(t, fmt.Sprintf("%s's status patch of %s forbidden", user, tierName), func() (bool, string) {
		reqs, _ := readAudit(t, c.auditLog, offset)
		hit := slices.ContainsFunc(reqs[user], func(r request) bool {
			return !r.Allowed && r.Name == tierName && r.Verb == removed.Verb && r.Resource == removed.Resource
		})
		return hit, summary(reqs[user])
	})
	cur, err := in.get(t, tier)
	if err != nil {
		t.Fatal(err)
	}
	check(t, cur)
}

// eventually polls cond until it returns true, failing the test with
// cond's last reason after waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	if ok, why := poll(cond); !ok {
		t.Fatalf("%s: not reached within %v: %s", what, waitTimeout, why)
	}
}

// poll calls cond every pollInterval until it returns true or waitTimeout
// passed, and returns its last result.
func poll(cond func() (bool, string)) (bool, string) {
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return true, ""
		}
		select {
		case <-deadline.C:
			return false, why
		case <-tick.C:
		}
	}
}

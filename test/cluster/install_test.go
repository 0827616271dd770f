//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/docblock"
)

// The tier the install test declares, in the names docs/INSTALL.md's
// blocks use.
const (
	tierName    = "llama-70b"
	servedModel = "e2e/llm"
	// frontDoor is the router's front door on the node (config/router).
	frontDoor = "http://127.0.0.1:8080"
)

// Bounds of the install test.
const (
	// stepTimeout bounds one documented step; the steps' own kubectl
	// timeouts are longer, for real clusters.
	stepTimeout = 5 * time.Minute
	// requestTimeout bounds one request through the router.
	requestTimeout = 30 * time.Second
	// statusTimeout bounds the wait for the router's report in the tier's
	// status.
	statusTimeout = time.Minute
	// shortTokens is what a request of the load generates: a few tens of
	// milliseconds on an idle engine.
	shortTokens = 4
	// engineLoadTime is how long an engine takes to start listening, as
	// a real engine loads its model: a restarted engine is away for
	// longer than the router's probe interval (2 s), so the router
	// reports it not ready before it comes back.
	engineLoadTime = 6 * time.Second
	// longTokens is what a request held in flight generates: about ten
	// seconds at enginesim's 10 ms per token, long enough for the router
	// to report the member Draining while it runs (the test prints how
	// long the report took).
	longTokens = 1000
)

// engine is one enginesim replica on the node: a Deployment of one
// host-network pod, and the tier's member it backs.
type engine struct {
	member  string
	port    int
	ceiling int32
}

// engines are the tier's members. The ceilings differ, so that Capacity's
// spread shows.
var engines = []engine{{member: "gpu0", port: 8001, ceiling: 4}, {member: "gpu1", port: 8002, ceiling: 2}}

// tierManifest is the tier: config/samples/capacity.yaml with this node,
// these engines and small ceilings. %s: the node, then each member's
// endpoint and ceiling.
const tierManifest = `apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata:
  name: llama-70b
  namespace: default
spec:
  nodeName: %s
  aliases: [llama-70b]
  servedModel: e2e/llm
  strategy: Capacity
  members:
  - id: %s
    endpoint: http://127.0.0.1:%d
    maxConcurrency: %d
    metrics: {engine: vllm}
  - id: %s
    endpoint: http://127.0.0.1:%d
    maxConcurrency: %d
    metrics: {engine: vllm}
`

// install is the state the install test's steps share.
type install struct {
	n     *node
	steps map[string]string // docs/INSTALL.md's blocks.
	env   []string          // the blocks' environment.
	key   string            // the router's API key.
}

// TestInstallOnANode installs sluice on the node the way docs/INSTALL.md
// says, with two enginesim replicas as the engines, and goes through what
// an operator does with it: a Capacity tier, a quiesce with a request in
// flight, a rollout of the routers under load, an engine restart and the
// uninstall. Each step needs the ones before it, so the first failure ends
// the test.
func TestInstallOnANode(t *testing.T) {
	n := startNode(t)
	steps, err := docblock.Blocks(filepath.Join(repoRoot, "docs", "INSTALL.md"), "e2e-cluster")
	if err != nil {
		t.Fatal(err)
	}
	marked := slices.Sorted(maps.Keys(steps))
	if !slices.Equal(marked, slices.Sorted(slices.Values(documentedSteps))) {
		t.Fatalf("docs/INSTALL.md marks the steps %v, the test runs %v", marked, documentedSteps)
	}
	tier := filepath.Join(n.dir, "tier.yaml")
	write(t, tier, fmt.Sprintf(tierManifest, nodeName,
		engines[0].member, engines[0].port, engines[0].ceiling, engines[1].member, engines[1].port, engines[1].ceiling))
	kubectl, err := filepath.Abs(filepath.Dir(bin(t, "kubectl")))
	if err != nil {
		t.Fatal(err)
	}
	in := &install{n: n, steps: steps, env: []string{
		"KUBECONFIG=" + n.kubeconfig,
		"PATH=" + kubectl + string(os.PathListSeparator) + os.Getenv("PATH"),
		"IMG_MANAGER=" + n.projectImage(t, "manager"),
		"IMG_ROUTER=" + n.projectImage(t, "router"),
		"NODE=" + nodeName,
		"TIER=" + tier,
	}}
	in.startEngines(t, n.projectImage(t, "enginesim"))
	for _, s := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"install", in.testInstall},
		{"capacity tier", in.testCapacityTier},
		{"quiesce with a request in flight", in.testQuiesce},
		{"router rollout under load", in.testRollout},
		{"engine restart", in.testEngineRestart},
		{"uninstall", in.testUninstall},
	} {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

// documentedSteps are the blocks of docs/INSTALL.md the test runs.
var documentedSteps = []string{"install", "tier", "api-key", "quiesce", "readmit", "rollout", "uninstall"}

// step runs the documented step name from the repository root and returns
// its output; it fails the test when the step fails.
func (in *install) step(t *testing.T, name string) string {
	t.Helper()
	out, err := in.runStep(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s:\n%s", name, out)
	return out
}

// runStep runs the documented step name from the repository root and
// returns its output.
func (in *install) runStep(name string) (string, error) {
	script, ok := in.steps[name]
	if !ok {
		return "", fmt.Errorf("docs/INSTALL.md has no block marked <!-- e2e-cluster: %s -->", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	return docblock.Run(ctx, repoRoot, in.env, script)
}

// startEngines runs each engine as a Deployment of one host-network pod,
// restricted like the router's; awaitEngines waits for them. The pods
// declare their port, so the scheduler never places a replacement beside a
// pod still holding it.
func (in *install) startEngines(t *testing.T, image string) {
	t.Helper()
	ctx := context.Background()
	yes, no := true, false
	one := int32(1)
	for _, e := range engines {
		labels := map[string]string{"app": "engine-" + e.member}
		port := intstr.FromInt32(int32(e.port)) //nolint:gosec // a port fits.
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "engine-" + e.member},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						HostNetwork:                   true,
						TerminationGracePeriodSeconds: new(int64(5)),
						Containers: []corev1.Container{{
							Name: "enginesim", Image: image, ImagePullPolicy: corev1.PullNever,
							Args: []string{"--listen", fmt.Sprintf("127.0.0.1:%d", e.port), "--model", servedModel,
								"--load-time", engineLoadTime.String()},
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(e.port)}}, //nolint:gosec // a port fits.
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Host: "127.0.0.1", Path: "/v1/models", Port: port}}, PeriodSeconds: 1},
							SecurityContext: &corev1.SecurityContext{
								RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
						}},
					},
				},
			},
		}
		if err := in.n.k8s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitEngines waits until every engine's pod is ready.
func (in *install) awaitEngines(t *testing.T) {
	t.Helper()
	for _, e := range engines {
		in.n.awaitReady(t, "default", map[string]string{"app": "engine-" + e.member})
	}
}

// testInstall runs the documented install and checks that the manager and
// the router run as the manifests say, on this node, through their real
// probes.
func (in *install) testInstall(t *testing.T) {
	in.step(t, "install")
	for _, c := range []struct {
		namespace string
		labels    map[string]string
	}{
		{"sluice-system", map[string]string{"app.kubernetes.io/component": "manager"}},
		{"sluice-router", map[string]string{"app.kubernetes.io/component": "router"}},
	} {
		pod := in.n.awaitReady(t, c.namespace, c.labels)
		if pod.Spec.NodeName != nodeName {
			t.Errorf("%s/%s runs on %q, want %q", pod.Namespace, pod.Name, pod.Spec.NodeName, nodeName)
		}
		if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s/%s: containers %+v, want one that never restarted", pod.Namespace, pod.Name, pod.Status.ContainerStatuses)
		}
	}
}

// testCapacityTier declares the tier and sends requests through the node's
// router: within the tier's ceilings every request succeeds and the
// members share them by capacity; beyond them the router turns requests
// away, and no engine ever runs more than its member's ceiling.
func (in *install) testCapacityTier(t *testing.T) {
	in.awaitEngines(t)
	in.step(t, "tier")
	in.key = strings.TrimSpace(in.step(t, "api-key"))
	if in.key == "" {
		t.Fatal("the router's API key is empty")
	}
	in.awaitMembers(t, "both members ready and admitting", func(m sluicev1.MemberStatus) bool {
		return m.Ready && m.Phase == sluicev1.MemberAdmitting
	})

	// One request fewer than the tier's ceilings: a client's next request
	// may reach the router before its previous lease is released.
	capacity := int(engines[0].ceiling + engines[1].ceiling)
	resetEngines(t)
	res := in.load(capacity-1, 12)
	if res.ok != res.sent {
		t.Fatalf("within the ceilings: %s, want every request to succeed", res)
	}
	served := engineStats(t)
	checkCeilings(t, served)
	first, second := served[0].TotalRequests, served[1].TotalRequests
	if first+second != uint64(res.sent) { //nolint:gosec // counts.
		t.Errorf("the engines served %d+%d requests, the clients sent %d", first, second, res.sent)
	}
	// Capacity ranks members by active/ceiling: five requests in flight
	// split 3:2 (3/4 and 2/2 full; 4:1 would leave gpu0 full and gpu1
	// half), so gpu0 serves about 3/5 of them where an even spread gives
	// 1/2.
	if share := float64(first) / float64(first+second); first <= second || share > 0.7 {
		t.Errorf("%s served %d and %s %d: a share of %.2f for the ceiling of %d, want about 3/5", engines[0].member, first, engines[1].member, second, share, engines[0].ceiling)
	}
	t.Logf("within the ceilings: %s; %s served %d (high-water %d), %s %d (high-water %d)", res,
		engines[0].member, first, served[0].MaxInFlight, engines[1].member, second, served[1].MaxInFlight)

	// Twice the ceilings: the router admits up to them and turns the rest
	// away at once with 503 capacity_exhausted.
	resetEngines(t)
	res = in.load(2*capacity, 6)
	if res.ok == 0 || res.ok+res.full != res.sent {
		t.Fatalf("beyond the ceilings: %s, want successes and the rest turned away as capacity_exhausted", res)
	}
	served = engineStats(t)
	checkCeilings(t, served)
	for i, e := range engines {
		if served[i].MaxInFlight != int(e.ceiling) {
			t.Errorf("beyond the ceilings, %s's engine ran at most %d requests at once, want its ceiling %d", e.member, served[i].MaxInFlight, e.ceiling)
		}
	}
	t.Logf("beyond the ceilings: %s; high-water %d and %d", res, served[0].MaxInFlight, served[1].MaxInFlight)
}

// testQuiesce holds a request in flight on each member, quiesces gpu1 as
// documented, and checks that the router reports it Draining while its
// request runs and Drained after, that the documented `kubectl wait`
// returns, and that the request completes.
func (in *install) testQuiesce(t *testing.T) {
	// Two requests at once go to different members: after the first,
	// its member's ratio is above the idle one's.
	held := make(chan result, len(engines))
	for range engines {
		go func() { held <- in.stream(longTokens) }()
	}
	if err := supervise.Poll(context.Background(), statusTimeout, "a request in flight on each engine", func() (bool, string, error) {
		s := engineStats(t)
		return s[0].InFlight == 1 && s[1].InFlight == 1, fmt.Sprintf("in flight: %d and %d", s[0].InFlight, s[1].InFlight), nil
	}); err != nil {
		t.Fatal(err)
	}
	type stepResult struct {
		out string
		err error
	}
	quiesced := make(chan stepResult, 1)
	patched := time.Now()
	go func() {
		out, err := in.runStep("quiesce")
		quiesced <- stepResult{out, err}
	}()
	in.awaitMembers(t, "gpu1 Draining", func(m sluicev1.MemberStatus) bool {
		return m.ID != "gpu1" || m.Phase == sluicev1.MemberDraining
	})
	t.Logf("QUIESCE: gpu1 reported Draining %v after the quiesce step started", time.Since(patched).Round(100*time.Millisecond))
	if s := engineStats(t); s[1].InFlight != 1 {
		t.Fatalf("gpu1 is Draining with %d requests in flight, want the held one", s[1].InFlight)
	}
	if r := <-quiesced; r.err != nil {
		t.Error(r.err)
	} else if !strings.Contains(r.out, "condition met") {
		t.Errorf("kubectl wait printed %q", r.out)
	}
	for range engines {
		if r := <-held; r.err != nil || r.status != http.StatusOK || !r.done {
			t.Errorf("a held request: %+v, want 200 ending in [DONE]", r)
		}
	}
	in.awaitMembers(t, "gpu1 Drained, gpu0 Admitting", func(m sluicev1.MemberStatus) bool {
		return m.Phase == map[string]sluicev1.MemberPhase{"gpu0": sluicev1.MemberAdmitting, "gpu1": sluicev1.MemberDrained}[m.ID]
	})
}

// testRollout restarts the router DaemonSet as documented while clients
// keep sending requests, with gpu1 still quiesced: the new router must
// restore the quiesce before it serves (gpu1's engine gets no request),
// and the test reports how many requests failed during the rollout. Then
// it readmits gpu1.
func (in *install) testRollout(t *testing.T) {
	before := in.n.routerPod(t)
	resetEngines(t)
	stop := make(chan struct{})
	done := make(chan loadResult, 1)
	go func() { done <- in.loadUntil(stop, int(engines[0].ceiling)-1) }()
	in.step(t, "rollout")
	close(stop)
	during := <-done
	// Requests once the rollout is complete.
	after := in.n.routerPod(t)
	res := in.load(int(engines[0].ceiling)-1, 5)
	if after.UID == before.UID {
		t.Fatalf("the router pod %s was not replaced", before.Name)
	}
	if res.ok != res.sent {
		t.Errorf("after the rollout: %s, want every request to succeed", res)
	}
	s := engineStats(t)
	if s[1].TotalRequests != 0 {
		t.Errorf("quiesced gpu1 served %d requests during the rollout: the new router served before it restored the quiesce", s[1].TotalRequests)
	}
	checkCeilings(t, s)
	t.Logf("ROLLOUT: %s during the rollout (router pod %s replaced by %s)", during, before.Name, after.Name)
	if during.ok == 0 {
		t.Errorf("during the rollout: %s, want requests served", during)
	}

	in.step(t, "readmit")
	in.awaitMembers(t, "both members admitting", func(m sluicev1.MemberStatus) bool {
		return m.Ready && m.Phase == sluicev1.MemberAdmitting
	})
}

// testEngineRestart deletes gpu0's engine pod: the router reports the
// member not ready within its probe interval, and once the Deployment's
// new pod is ready, the router readmits it on its own.
func (in *install) testEngineRestart(t *testing.T) {
	ctx := context.Background()
	old := in.n.awaitReady(t, "default", map[string]string{"app": "engine-gpu0"})
	deleted := time.Now()
	if err := in.n.k8s.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	in.awaitMembers(t, "gpu0 not ready", func(m sluicev1.MemberStatus) bool { return m.ID != "gpu0" || !m.Ready })
	away := time.Since(deleted)
	t.Logf("ENGINE: gpu0 reported not ready %v after its pod was deleted", away.Round(100*time.Millisecond))
	if away > engineLoadTime {
		t.Errorf("gpu0 reported not ready only %v after its pod was deleted, want within the replacement's load time of %v", away, engineLoadTime)
	}
	fresh := in.n.awaitReady(t, "default", map[string]string{"app": "engine-gpu0"})
	if fresh.UID == old.UID {
		t.Fatal("the engine's pod was not replaced")
	}
	in.awaitMembers(t, "gpu0 ready again", func(m sluicev1.MemberStatus) bool { return m.Ready })
	t.Logf("ENGINE: gpu0 ready again %v after its pod was deleted", time.Since(deleted).Round(100*time.Millisecond))
	resetEngines(t)
	res := in.load(int(engines[0].ceiling+engines[1].ceiling)-1, 6)
	if res.ok != res.sent {
		t.Errorf("after the engine restart: %s, want every request to succeed", res)
	}
	if s := engineStats(t); s[0].TotalRequests == 0 {
		t.Error("the restarted engine got no request: the router did not readmit it")
	}
}

// testUninstall runs the documented uninstall and waits until nothing
// config/default installs is left, the router's Secrets and the tier
// included, and nothing serves on the router's ports.
func (in *install) testUninstall(t *testing.T) {
	in.step(t, "uninstall")
	err := supervise.Poll(context.Background(), 3*time.Minute, "everything sluice installed gone", func() (bool, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		out, err := docblock.Run(ctx, repoRoot, in.env,
			"kubectl get -k config/default --ignore-not-found -o name")
		if err != nil {
			return false, "", err
		}
		return strings.TrimSpace(out) == "", "left: " + strings.Join(strings.Fields(out), " "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := supervise.Poll(context.Background(), time.Minute, "the router's pods gone", func() (bool, string, error) {
		var pods corev1.PodList
		if err := in.n.k8s.List(context.Background(), &pods, client.MatchingLabels{"app.kubernetes.io/name": "sluice"}); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
	}); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	if conn, err := d.DialContext(context.Background(), "tcp", strings.TrimPrefix(frontDoor, "http://")); err == nil {
		_ = conn.Close()
		t.Error("something still serves on the router's port after the uninstall")
	}
}

// awaitMembers waits until the router's report of every member of the
// tier meets cond.
func (in *install) awaitMembers(t *testing.T, what string, cond func(sluicev1.MemberStatus) bool) {
	t.Helper()
	err := supervise.Poll(context.Background(), statusTimeout, what, func() (bool, string, error) {
		var tier sluicev1.ReplicaTier
		if err := in.n.k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: tierName}, &tier); err != nil {
			return false, "", err
		}
		if len(tier.Status.Members) != len(engines) {
			return false, fmt.Sprintf("members %+v", tier.Status.Members), nil
		}
		for _, m := range tier.Status.Members {
			if !cond(m) {
				return false, fmt.Sprintf("members %+v", tier.Status.Members), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// result is the outcome of one request through the router.
type result struct {
	stream bool
	status int
	code   string // the error body's code, if any.
	done   bool   // a stream ended with [DONE].
	err    error
}

// request sends one chat completion for the tier's alias through the
// router's front door.
func (in *install) request(tokens int, stream bool) result {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello"}],"max_tokens":%d,"stream":%t}`, tierName, tokens, stream)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, frontDoor+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return result{stream: stream, err: err}
	}
	req.Header.Set("Authorization", "Bearer "+in.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{stream: stream, err: err}
	}
	defer resp.Body.Close()
	r := result{stream: stream, status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e); err != nil {
			r.err = err
		}
		r.code = e.Error.Code
		return r
	}
	if !stream {
		_, r.err = io.Copy(io.Discard, resp.Body)
		return r
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if lines.Text() == "data: [DONE]" {
			r.done = true
		}
	}
	r.err = lines.Err()
	return r
}

// stream sends one streamed request generating tokens.
func (in *install) stream(tokens int) result { return in.request(tokens, true) }

// loadResult counts the outcomes of many requests.
type loadResult struct {
	sent, ok, full int
	failures       map[string]int // other outcomes by kind.
}

// String is the counts, with each kind of failure.
func (r loadResult) String() string {
	return fmt.Sprintf("%d requests, %d succeeded, %d turned away at capacity, failed %v", r.sent, r.ok, r.full, r.failures)
}

// add counts one outcome.
func (r *loadResult) add(o result) {
	r.sent++
	switch {
	case o.err == nil && o.status == http.StatusOK:
		r.ok++
	case o.err == nil && o.status == http.StatusServiceUnavailable && o.code == "capacity_exhausted":
		r.full++
	default:
		if r.failures == nil {
			r.failures = map[string]int{}
		}
		kind := fmt.Sprintf("%d %s", o.status, o.code)
		if o.err != nil {
			kind = o.err.Error()
			if errors.Is(o.err, context.DeadlineExceeded) {
				kind = "timeout"
			}
			if o.status != 0 {
				kind = fmt.Sprintf("%s after %d", kind, o.status)
			}
		}
		if o.stream {
			kind = "stream: " + kind
		}
		r.failures[kind]++
	}
}

// load sends each client's requests one after the other, clients at once,
// and counts the outcomes.
func (in *install) load(clients, each int) loadResult {
	var n atomic.Int64
	total := int64(clients * each)
	return in.run(clients, func() bool { return n.Add(1) <= total })
}

// loadUntil sends requests from clients at once until stop closes.
func (in *install) loadUntil(stop <-chan struct{}, clients int) loadResult {
	return in.run(clients, func() bool {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	})
}

// run runs clients, each sending short requests, alternately plain and
// streamed, while more says so, and counts the outcomes.
func (in *install) run(clients int, more func() bool) loadResult {
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for i := 0; more(); i++ {
				o := in.request(shortTokens, i%2 == 1)
				mu.Lock()
				res.add(o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

// engineStats returns each engine's statistics, in engines' order.
func engineStats(t *testing.T) []enginesim.Stats {
	t.Helper()
	out := make([]enginesim.Stats, len(engines))
	for i, e := range engines {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/stats", e.port)) //nolint:noctx // loopback, answered at once.
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&out[i])
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// resetEngines zeroes every engine's counters and high-water marks.
func resetEngines(t *testing.T) {
	t.Helper()
	for _, e := range engines {
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/debug/reset", e.port), "", nil) //nolint:noctx // loopback, answered at once.
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
}

// checkCeilings fails the test when an engine ran more requests at once
// than its member's ceiling.
func checkCeilings(t *testing.T, s []enginesim.Stats) {
	t.Helper()
	for i, e := range engines {
		if s[i].MaxInFlight > int(e.ceiling) {
			t.Errorf("%s's engine ran %d requests at once, over its ceiling of %d", e.member, s[i].MaxInFlight, e.ceiling)
		}
	}
}

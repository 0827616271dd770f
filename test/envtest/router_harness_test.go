package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/status"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// Waits of the router specs. The machine is shared and small: these are
// deadlines for a broken test, not how long a passing one takes.
const (
	routerTimeout = 60 * time.Second
	routerPoll    = 100 * time.Millisecond
	// quietPeriod is how long a Consistently watches for something that
	// must not happen.
	quietPeriod = 2 * time.Second
	// servedModel is what every test engine serves.
	servedModel = "test/model"
)

// testEngine is an OpenAI-compatible engine for one member on loopback: it
// lists servedModel and answers chat completions, counting them. While
// holding, a completion signals arrived and blocks until released.
type testEngine struct {
	srv *httptest.Server

	mu      sync.Mutex
	count   int
	hold    chan struct{} // nil: answer at once.
	arrived chan struct{}
}

func newTestEngine() *testEngine {
	e := &testEngine{}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	DeferCleanup(e.srv.Close)
	return e
}

func (e *testEngine) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+servedModel+`","object":"model"}]}`)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	e.mu.Lock()
	e.count++
	hold, arrived := e.hold, e.arrived
	e.mu.Unlock()
	if hold != nil {
		arrived <- struct{}{}
		<-hold
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
}

// requests is the number of completions that reached the engine.
func (e *testEngine) requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count
}

// holdNext makes the next completions block; it returns the channel on
// which each signals its arrival and the function that releases them.
func (e *testEngine) holdNext() (<-chan struct{}, func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	hold, arrived := make(chan struct{}), make(chan struct{}, 16)
	e.hold, e.arrived = hold, arrived
	return arrived, func() {
		e.mu.Lock()
		e.hold = nil
		e.mu.Unlock()
		close(hold)
	}
}

// endpoint is the engine's base URL (http://127.0.0.1:port).
func (e *testEngine) endpoint() string { return e.srv.URL }

// logBuffer collects a router's log lines for specs that look for one.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = GinkgoWriter.Write(p)
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// adminToken is the bearer token of the test routers' admin listener.
const adminToken = "envtest-admin-token"

// testRouter is a router running in-process with the kube source, the
// readiness probes, the status reporter and a decision log, wired as
// cmd/router wires them, with its front door and its admin listener
// (token adminToken) on loopback.
type testRouter struct {
	front  *httptest.Server
	admin  *httptest.Server
	logs   *logBuffer
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startRouter starts a router for node against the API server of restCfg.
// It is stopped when the spec ends, or earlier with stop.
func startRouter(restCfg *rest.Config, node string) *testRouter {
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	r := &testRouter{logs: &logBuffer{}}
	logger := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	kube, err := source.NewKube(source.KubeOptions{
		NodeName:      node,
		ListerWatcher: source.NewTierListerWatcher(c, node),
		Logger:        logger,
	})
	Expect(err).NotTo(HaveOccurred())
	// Probing every second keeps a member ready for three seconds after a
	// probe, so a busy machine's delayed probe does not fail a spec.
	probes := readiness.New(readiness.Options{Interval: time.Second})
	decisions, err := evidence.NewLog(evidence.LogOptions{Size: evidence.DefaultLogSize})
	Expect(err).NotTo(HaveOccurred())
	rt := router.New(router.Options{Readiness: probes, Rechecker: probes, Logger: logger, Recorder: router.EvidenceRecorder(decisions)})
	token, err := apikeys.Parse([]byte(adminToken + "\n"))
	Expect(err).NotTo(HaveOccurred())
	admin := adminserver.New(rt.Tiers(), adminserver.Options{Token: token})
	decisions.RegisterRoutes(admin.Handle)
	view := status.NewRouterView(admin)
	reporter, err := status.NewReporter(status.Options{Writer: status.NewAPIWriter(c), Node: node, View: view, Logger: logger})
	Expect(err).NotTo(HaveOccurred())

	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done.Go(func() { _ = probes.Run(ctx) })
	r.done.Go(func() { _ = reporter.Run(ctx) })
	r.done.Go(func() {
		_ = kube.Run(ctx, func(s source.Snapshot) {
			if err := probes.Reconfigure(tiers.ReadinessTiers(s)); err != nil {
				logger.Error("readiness probes not reconfigured", "error", err.Error())
			}
			rt.Tiers().Apply(s)
			reporter.Notify()
		})
	})
	r.front = httptest.NewServer(rt)
	r.admin = httptest.NewServer(admin)
	DeferCleanup(r.stop)
	return r
}

// stop stops the router and waits for its goroutines; a second call does
// nothing.
func (r *testRouter) stop() {
	if r.cancel == nil {
		return
	}
	r.front.Close()
	r.admin.Close()
	r.cancel()
	r.done.Wait()
	r.cancel = nil
}

// reply is one front door answer.
type reply struct {
	status int
	member string
	code   string
}

// chat sends one chat completion for model and returns the answer.
func (r *testRouter) chat(model string) reply {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, r.front.URL+"/v1/chat/completions", strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.front.Client().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	out := reply{status: resp.StatusCode, member: resp.Header.Get("X-Sluice-Member")}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		out.code = e.Error.Code
	}
	return out
}

// capacityTier returns a Capacity tier of two members (gpu0, gpu1) on node
// pointing at the engines, with one alias.
func capacityTier(ns, name, node, alias string, gpu0, gpu1 *testEngine) *sluicev1.ReplicaTier {
	four := int32(4)
	return &sluicev1.ReplicaTier{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sluicev1.ReplicaTierSpec{
			NodeName:    node,
			Aliases:     []string{alias},
			ServedModel: servedModel,
			Strategy:    sluicev1.StrategyCapacity,
			Members: []sluicev1.Member{
				{ID: "gpu0", Endpoint: gpu0.endpoint(), MaxConcurrency: &four},
				{ID: "gpu1", Endpoint: gpu1.endpoint(), MaxConcurrency: &four},
			},
		},
	}
}

// routerStatus formats the router-owned status of a tier for Eventually:
// "applied=G/GEN gpu0=Phase/ready gpu1=...".
func routerStatus(ctx context.Context, c client.Client, t *sluicev1.ReplicaTier) func() string {
	return func() string {
		cur := &sluicev1.ReplicaTier{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(t), cur); err != nil {
			return err.Error()
		}
		s := "applied=none"
		if r := cur.Status.Router; r != nil {
			s = fmt.Sprintf("applied=%d/%d", r.AppliedGeneration, cur.Generation)
		}
		for _, m := range cur.Status.Members {
			s += fmt.Sprintf(" %s=%s/%t", m.ID, m.Phase, m.Ready)
		}
		return s
	}
}

// servedBy sends requests for model until every member in want answered
// one, and fails on an answer from a member outside want.
func servedBy(r *testRouter, model string, want ...string) {
	seen := map[string]bool{}
	Eventually(func(g Gomega) {
		rep := r.chat(model)
		g.Expect(rep.status).To(Equal(http.StatusOK), "code %s", rep.code)
		Expect(want).To(ContainElement(rep.member), "a request reached %s", rep.member)
		seen[rep.member] = true
		g.Expect(seen).To(HaveLen(len(want)))
	}).WithTimeout(routerTimeout).WithPolling(routerPoll).Should(Succeed())
}

// waitNextSecond returns once the API server's clock has passed the
// creation second of t, so a tier created next is strictly newer.
func waitNextSecond(ctx context.Context, c client.Client, t *sluicev1.ReplicaTier) {
	cur := &sluicev1.ReplicaTier{}
	Expect(c.Get(ctx, client.ObjectKeyFromObject(t), cur)).To(Succeed())
	Eventually(func() bool {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-", Namespace: t.Namespace}}
		Expect(c.Create(ctx, probe)).To(Succeed())
		return probe.CreationTimestamp.After(cur.CreationTimestamp.Time)
	}).WithTimeout(routerTimeout).Should(BeTrue())
}

// mergePatchWith sends a JSON merge patch to the spec through c.
func mergePatchWith(ctx context.Context, c client.Client, t *sluicev1.ReplicaTier, body string) error {
	return c.Patch(ctx, t.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body)))
}

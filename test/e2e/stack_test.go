package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/testproc"
)

// Names shared by the tests.
const (
	// nodeName is the router's node; every test tier is on it.
	nodeName = "e2e-node"
	// servedModel is the model every engine serves and every tier requires.
	servedModel = "e2e/llm"
	// tierNamespace is the namespace of every test tier.
	tierNamespace = "e2e"
)

// Waiting bounds.
const (
	// pollInterval is how often eventually checks its condition; polling a
	// real process's HTTP endpoint is the only way to observe it.
	pollInterval = 20 * time.Millisecond
	// waitTimeout bounds every eventually; reached only when a test fails.
	waitTimeout = 30 * time.Second
	// httpTimeout bounds one admin or debug call.
	httpTimeout = 5 * time.Second
	// routerShutdownTimeout is the router's --shutdown-timeout: long
	// enough for the drain test's streams, below testproc.StopGrace.
	routerShutdownTimeout = 10 * time.Second
	// maxBody bounds the bodies the tests read.
	maxBody = 4 << 20
)

// eventually polls cond every pollInterval until it returns true, failing
// the test with cond's last reason after waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testproc.Eventually(t, what, waitTimeout, pollInterval, cond)
}

// engine is a running enginesim process.
type engine struct {
	*supervise.Process
	addr string
}

// url returns the engine's base URL.
func (e *engine) url() string { return "http://" + e.addr }

// fastEngine is the default enginesim configuration of the tests: short
// latencies so a request takes a few tens of milliseconds.
var fastEngine = []string{"--ttft-base", "5ms", "--ttft-per-seq", "0s", "--itl-base", "1ms", "--itl-per-seq", "0s"}

// startEngine starts an enginesim serving only servedModel, as a vLLM
// engine serves only its --served-model-name: a request naming a tier's
// alias reaches it only through the router's model rewrite. extra flags
// come after the defaults (later flags win).
func startEngine(t *testing.T, name string, extra ...string) *engine {
	t.Helper()
	args := []string{"--listen", "127.0.0.1:0", "--model", servedModel}
	args = append(args, fastEngine...)
	args = append(args, extra...)
	e := &engine{}
	e.Process = testproc.Start(t, t, name, bins.enginesim, args, startlines.EngineAddr(&e.addr))
	return e
}

// engineStats is the part of enginesim's GET /debug/stats the tests read.
type engineStats struct {
	InFlight      int    `json:"in_flight"`
	MaxInFlight   int    `json:"max_in_flight"`
	Running       int    `json:"running"`
	Waiting       int    `json:"waiting"`
	TotalRequests uint64 `json:"total_requests"`
}

// stats returns the engine's /debug/stats.
func (e *engine) stats(t *testing.T) engineStats {
	t.Helper()
	var s engineStats
	if err := getJSON(e.url()+"/debug/stats", &s); err != nil {
		t.Fatalf("%s stats: %v", e.Name(), err)
	}
	return s
}

// reset zeroes the engine's /debug/stats maxima and counters.
func (e *engine) reset(t *testing.T) {
	t.Helper()
	resp, err := postJSON(context.Background(), e.url()+"/debug/reset", "")
	if err != nil {
		t.Fatalf("%s reset: %v", e.Name(), err)
	}
	if resp.status != http.StatusNoContent {
		t.Fatalf("%s reset: status %d", e.Name(), resp.status)
	}
}

// member is one member of a test tier.
type member struct {
	id      string
	engine  *engine
	ceiling int32 // 0: none
}

// tier describes a test tier.
type tier struct {
	name     string
	alias    string
	strategy sluicev1.Strategy // empty: direct tier (one member) or RoundRobin default
	members  []member
	upstream sluicev1.UpstreamModel // empty: ServedModel
	quiesce  *sluicev1.QuiesceSpec  // nil: everything admits
	// noMetrics leaves the members without a metrics engine: the router
	// never scrapes them and their pressure always reads unknown.
	noMetrics bool
	// queue is the tier's spec.queue; nil: none.
	queue *sluicev1.QueueSpec
}

// key is the tier's namespace/name.
func (t tier) key() string { return tierNamespace + "/" + t.name }

// manifest renders the tier as a ReplicaTier manifest.
func (t tier) manifest() ([]byte, error) {
	rt := sluicev1.ReplicaTier{}
	rt.APIVersion, rt.Kind = "sluice.dev/v1alpha1", "ReplicaTier"
	rt.Name, rt.Namespace = t.name, tierNamespace
	rt.Spec.NodeName = nodeName
	rt.Spec.Aliases = []string{t.alias}
	rt.Spec.ServedModel = servedModel
	rt.Spec.Strategy = t.strategy
	rt.Spec.UpstreamModel = t.upstream
	rt.Spec.Quiesce = t.quiesce
	rt.Spec.Queue = t.queue
	for _, m := range t.members {
		sm := sluicev1.Member{ID: m.id, Endpoint: m.engine.url()}
		if !t.noMetrics {
			sm.Metrics = &sluicev1.MetricsSpec{Engine: "vllm"}
		}
		if m.ceiling > 0 {
			c := m.ceiling
			sm.MaxConcurrency = &c
		}
		rt.Spec.Members = append(rt.Spec.Members, sm)
	}
	if errs := sluicev1.Validate(&rt); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return yaml.Marshal(&rt)
}

// router is a running router process.
type router struct {
	*supervise.Process
	front, admin string
	// dir is the --tiers-dir the router watches.
	dir string
}

// startRouter writes the tiers' manifests to a fresh directory, starts a
// router on it and waits until every member of every tier is ready.
func startRouter(t *testing.T, tiers ...tier) *router {
	t.Helper()
	return startRouterArgs(t, nil, tiers...)
}

// startRouterArgs is startRouter with further router flags (later flags
// win).
func startRouterArgs(t *testing.T, extra []string, tiers ...tier) *router {
	t.Helper()
	return startRouterBin(t, bins.router, extra, tiers...)
}

// startRouterBin is startRouterArgs with the router binary bin.
func startRouterBin(t *testing.T, bin string, extra []string, tiers ...tier) *router {
	t.Helper()
	r := &router{dir: t.TempDir()}
	for _, tr := range tiers {
		r.writeTier(t, tr)
	}
	args := []string{
		"--tiers-dir", r.dir,
		"--node-name", nodeName,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--shutdown-timeout", routerShutdownTimeout.String(),
		// No handover grace: no second router takes over here, and the
		// drain test checks the front door closes while streams run.
		"--shutdown-grace", "0s",
	}
	args = append(args, extra...)
	r.Process = testproc.Start(t, t, "router", bin, args, startlines.RouterAddrs(&r.front, &r.admin))
	for _, tr := range tiers {
		eventually(t, "members of "+tr.key()+" ready", func() (bool, string) {
			v, err := r.tierCapacity(tr.key())
			if err != nil {
				return false, err.Error()
			}
			if len(v.Members) != len(tr.members) {
				return false, fmt.Sprintf("%d members", len(v.Members))
			}
			for _, m := range v.Members {
				if !m.Ready {
					return false, "member " + m.ID + " not ready"
				}
			}
			return true, ""
		})
	}
	return r
}

// writeTier writes the tier's manifest into the router's tiers directory,
// replacing the previous one atomically (a rename), so the router never
// reads half a file.
func (r *router) writeTier(t *testing.T, tr tier) {
	t.Helper()
	raw, err := tr.manifest()
	if err != nil {
		t.Fatalf("tier %s: %v", tr.name, err)
	}
	tmp := filepath.Join(r.dir, "."+tr.name+".tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, tr.name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// baseURL is the router's OpenAI API root.
func (r *router) baseURL() string { return "http://" + r.front + "/v1" }

// tierCapacity returns one tier's entry of the router's capacity view.
func (r *router) tierCapacity(key string) (adminapi.TierCapacity, error) {
	var v adminapi.CapacityView
	if err := getJSON("http://"+r.admin+"/admin/v1/capacity", &v); err != nil {
		return adminapi.TierCapacity{}, err
	}
	for _, tr := range v.Tiers {
		if tr.Tier == key {
			return tr, nil
		}
	}
	return adminapi.TierCapacity{}, fmt.Errorf("tier %s not in the capacity view", key)
}

// awaitActive waits until the tier and each of its members hold exactly
// want leases in total.
func (r *router) awaitActive(t *testing.T, key string, want int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d active leases in %s", want, key), func() (bool, string) {
		v, err := r.tierCapacity(key)
		if err != nil {
			return false, err.Error()
		}
		sum := 0
		for _, m := range v.Members {
			sum += m.Active
		}
		return v.Active == want && sum == want, fmt.Sprintf("tier active %d, members %+v", v.Active, v.Members)
	})
}

// httpClient is the tests' client for admin, debug and raw calls: no
// proxy, keep-alive.
var httpClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}

// getJSON GETs url and decodes its JSON body into v.
func getJSON(url string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	return adminapi.GetJSON(ctx, httpClient, url, maxBody, v)
}

// rawResponse is a response read whole.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// postJSON POSTs body as JSON and reads the whole response.
func postJSON(ctx context.Context, url, body string) (rawResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return rawResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return rawResponse{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return rawResponse{}, err
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

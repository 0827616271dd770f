//go:build gie

package gie

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/testproc"
)

// The routers' ports. Every node listens on the same ports of its own
// address, as pods of one InferencePool do: the pool's target port is the
// front door, the picker scrapes /metrics on the admin port.
const (
	// frontPort is each router's front door, the pool's target port.
	frontPort = 8000
	// adminPort is each router's admin listener, which serves /metrics.
	adminPort = 8001
)

// The one tier every node serves.
const (
	// tierNamespace and tierName name the tier on every node.
	tierNamespace, tierName = "gie", "llm"
	// alias is the model name the gateway's clients send.
	alias = "llm"
	// servedModel is the model every engine serves.
	servedModel = "gie/llm"
	// routerShutdownTimeout is the router's --shutdown-timeout, below
	// testproc.StopGrace.
	routerShutdownTimeout = 10 * time.Second
	// tiersPollInterval is the router's --tiers-poll-interval: a rewritten
	// tier file (a quiesce) is applied within it.
	tiersPollInterval = 200 * time.Millisecond
)

// Waiting bounds.
const (
	// pollInterval is how often eventually checks its condition; polling a
	// real process's HTTP endpoint is the only way to observe it.
	pollInterval = 50 * time.Millisecond
	// waitTimeout bounds every eventually; reached only when a test fails.
	waitTimeout = 60 * time.Second
	// httpTimeout bounds one admin, debug or metrics call.
	httpTimeout = 5 * time.Second
	// maxBody bounds the admin, debug and metrics bodies the test reads.
	maxBody = 4 << 20
)

// engineArgs are the engines' latencies: a request of the test's few
// output tokens takes tens of milliseconds, so requests overlap and the
// ceilings bind, and the whole load takes seconds.
var engineArgs = []string{"--ttft-base", "20ms", "--ttft-per-seq", "2ms", "--itl-base", "2ms", "--itl-per-seq", "0s"}

// nodeSpec describes one node: its address, its members and their
// ceilings, and further enginesim flags of its engines (hidden load, for
// the scenarios that need the routers' model-server gauges).
type nodeSpec struct {
	// name is the node's name, its router's --node-name and its Pod's.
	name string
	// ip is the node's loopback address (127.0.0.2 and up).
	ip string
	// ceilings has one entry per member: its maxConcurrency.
	ceilings []int32
	// engineFlags are added to each engine's flags (later flags win).
	engineFlags []string
	// queue is the tier's spec.queue; nil: none.
	queue *sluicev1.QueueSpec
}

// engine is one running enginesim of a node.
type engine struct {
	*supervise.Process
	member  string
	addr    string
	ceiling int32
}

// node is one running node: its engines and the router in front of them.
type node struct {
	spec    nodeSpec
	engines []*engine
	router  *supervise.Process
	front   string
	admin   string
	// tiersDir is the router's --tiers-dir, holding the tier's file.
	tiersDir string
}

// endpoint is the node's front door as the picker names it: ip:port.
func (n *node) endpoint() string { return net.JoinHostPort(n.spec.ip, strconv.Itoa(frontPort)) }

// startNode starts the node's engines on its address and a router in
// files mode in front of them, and waits until every member is ready.
// Everything stops when the test ends.
func startNode(t *testing.T, spec nodeSpec) *node {
	t.Helper()
	n := &node{spec: spec}
	for i, c := range spec.ceilings {
		e := &engine{member: fmt.Sprintf("gpu%d", i), ceiling: c}
		args := append([]string{"--listen", net.JoinHostPort(spec.ip, "0"), "--model", servedModel}, engineArgs...)
		args = append(args, spec.engineFlags...)
		e.Process = testproc.Start(t, t, spec.name+"/"+e.member, bins.enginesim, args, startlines.EngineAddr(&e.addr))
		n.engines = append(n.engines, e)
	}
	n.tiersDir = t.TempDir()
	n.writeTier(t, "")
	args := []string{
		"--tiers-dir", n.tiersDir,
		"--tiers-poll-interval", tiersPollInterval.String(),
		"--node-name", spec.name,
		"--listen", net.JoinHostPort(spec.ip, strconv.Itoa(frontPort)),
		"--admin-listen", net.JoinHostPort(spec.ip, strconv.Itoa(adminPort)),
		"--shutdown-timeout", routerShutdownTimeout.String(),
		"--shutdown-grace", "0s",
	}
	n.router = testproc.Start(t, t, spec.name+"/router", bins.router, args, startlines.RouterAddrs(&n.front, &n.admin))
	eventually(t, spec.name+": members ready", func() (bool, string) {
		v, err := n.capacity()
		if err != nil {
			return false, err.Error()
		}
		if len(v.Members) != len(n.engines) {
			return false, fmt.Sprintf("%d members", len(v.Members))
		}
		for _, m := range v.Members {
			if !m.Ready {
				return false, "member " + m.ID + " not ready"
			}
		}
		return true, ""
	})
	return n
}

// writeTier writes the node's tier file, quiesced with the reason quiesce
// (docs/API.md: spec.quiesce.tier) unless it is empty, through a rename so
// the router never reads half a file.
func (n *node) writeTier(t *testing.T, quiesce string) {
	t.Helper()
	raw, err := n.manifest(quiesce)
	if err != nil {
		t.Fatalf("%s: tier: %v", n.spec.name, err)
	}
	tmp := filepath.Join(n.tiersDir, "."+tierName+".yaml.tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.tiersDir, tierName+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// manifest renders the node's tier as a ReplicaTier manifest: its engines
// as members, read with the vLLM dialect, ranked by Capacity, the tier
// quiesced with the reason quiesce unless it is empty.
func (n *node) manifest(quiesce string) ([]byte, error) {
	rt := sluicev1.ReplicaTier{}
	rt.APIVersion, rt.Kind = "sluice.dev/v1alpha1", "ReplicaTier"
	rt.Name, rt.Namespace = tierName, tierNamespace
	rt.Spec.NodeName = n.spec.name
	rt.Spec.Aliases = []string{alias}
	rt.Spec.ServedModel = servedModel
	rt.Spec.Strategy = sluicev1.StrategyCapacity
	rt.Spec.Queue = n.spec.queue
	if quiesce != "" {
		rt.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: quiesce}
	}
	for _, e := range n.engines {
		c := e.ceiling
		rt.Spec.Members = append(rt.Spec.Members, sluicev1.Member{
			ID: e.member, Endpoint: "http://" + e.addr, MaxConcurrency: &c,
			Metrics: &sluicev1.MetricsSpec{Engine: sluicev1.EngineVLLM},
		})
	}
	if errs := sluicev1.Validate(&rt); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return yaml.Marshal(&rt)
}

// capacity returns the node's tier from its router's capacity view.
func (n *node) capacity() (adminapi.TierCapacity, error) {
	var v adminapi.CapacityView
	if err := getJSON("http://"+n.admin+"/admin/v1/capacity", &v); err != nil {
		return adminapi.TierCapacity{}, err
	}
	for _, tr := range v.Tiers {
		if tr.Tier == tierNamespace+"/"+tierName {
			return tr, nil
		}
	}
	return adminapi.TierCapacity{}, fmt.Errorf("tier %s/%s not in the capacity view", tierNamespace, tierName)
}

// engineStats is the part of enginesim's GET /debug/stats the test reads.
type engineStats struct {
	MaxInFlight   int    `json:"max_in_flight"`
	TotalRequests uint64 `json:"total_requests"`
}

// stats returns the engine's /debug/stats.
func (e *engine) stats(t *testing.T) engineStats {
	t.Helper()
	var s engineStats
	if err := getJSON("http://"+e.addr+"/debug/stats", &s); err != nil {
		t.Fatalf("%s stats: %v", e.Name(), err)
	}
	return s
}

// adminClient is the test's client for admin, debug and metrics calls: no
// proxy, keep-alive.
var adminClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}

// getJSON GETs url and decodes its JSON body into v.
func getJSON(url string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	return adminapi.GetJSON(ctx, adminClient, url, maxBody, v)
}

// eventually polls cond every pollInterval until it returns true, failing
// the test with cond's last reason after waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testproc.Eventually(t, what, waitTimeout, pollInterval, cond)
}

//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// Names shared by the engines, the router tiers and the request bodies.
// The model names have the same length, so every system under test gets
// request bodies of the same size.
const (
	// benchModel is the engines' served model, sent directly and through
	// HAProxy.
	benchModel = "sim-00"
	// aliasRoundRobin is the alias of the RoundRobin tier.
	aliasRoundRobin = "sim-rr"
	// aliasCapacity is the alias of the Capacity tier.
	aliasCapacity = "sim-cp"
	// aliasLateQueue, aliasLateCapacity and aliasLateRoundRobin are the
	// late binding scenario's tiers: Capacity with a queue, Capacity and
	// RoundRobin with ceilings above the engines' capacity.
	aliasLateQueue      = "sim-lq"
	aliasLateCapacity   = "sim-lc"
	aliasLateRoundRobin = "sim-lr"
	// aliasTenants is the two-tenant scenario's tier.
	aliasTenants = "sim-tq"
	// benchAliases are the further names every engine accepts, as a real
	// engine's extra --served-model-name values.
	benchAliases = aliasRoundRobin + "," + aliasCapacity + "," + aliasLateQueue + "," + aliasLateCapacity + "," +
		aliasLateRoundRobin + "," + aliasTenants
	// benchNode is the router's --node-name and every tier's nodeName.
	benchNode = "bench"
	// benchNamespace is every tier's namespace.
	benchNamespace = "bench"
	// benchMaxConnections is the router's --max-connections and
	// --max-unauthenticated-connections: the 5000-stream scenario opens
	// 5000 connections at once, above the router's defaults (4096, and
	// 1024 before their first request), which are sized for the
	// DaemonSet's memory limit (docs/CONFIGURATION.md#11-connection-limits).
	benchMaxConnections = "6000"
)

// tierSpec is one ReplicaTier the harness writes for the router.
type tierSpec struct {
	// Name is metadata.name.
	Name string
	// Alias is the tier's single alias.
	Alias string
	// Strategy is RoundRobin or Capacity.
	Strategy string
	// Ceiling is every member's maxConcurrency.
	Ceiling int
	// Engines are the members, named m0, m1, … in order.
	Engines []*engine
	// Queue is spec.queue; nil writes none.
	Queue *queueSpec
}

// queueSpec is a tier's spec.queue (docs/API.md#25-the-admission-queue).
type queueSpec struct {
	// MaxRequests is maxRequests.
	MaxRequests int
	// MaxWait is maxWait.
	MaxWait time.Duration
	// MaxPerTenant is maxRequestsPerTenant; zero writes none.
	MaxPerTenant int
}

// manifest renders the queue as the flow mapping of spec.queue.
func (q queueSpec) manifest() string {
	perTenant := ""
	if q.MaxPerTenant > 0 {
		perTenant = fmt.Sprintf(", maxRequestsPerTenant: %d", q.MaxPerTenant)
	}
	return fmt.Sprintf("{maxRequests: %d, maxWait: %s%s}", q.MaxRequests, q.MaxWait, perTenant)
}

// key returns the tier's namespace/name.
func (t tierSpec) key() string { return benchNamespace + "/" + t.Name }

// manifest renders the tier as a ReplicaTier manifest for files mode.
// Capacity tiers sample the members' vLLM metrics.
func (t tierSpec) manifest() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: sluice.dev/v1alpha1\nkind: ReplicaTier\nmetadata: {name: %s, namespace: %s}\nspec:\n", t.Name, benchNamespace)
	fmt.Fprintf(&b, "  nodeName: %s\n  aliases: [%s]\n  servedModel: %s\n  strategy: %s\n  members:\n", benchNode, t.Alias, benchModel, t.Strategy)
	for i, e := range t.Engines {
		metrics := ""
		if t.Strategy == "Capacity" {
			metrics = ", metrics: {engine: vllm}"
		}
		fmt.Fprintf(&b, "  - {id: m%d, endpoint: \"%s\", maxConcurrency: %d%s}\n", i, e.url(), t.Ceiling, metrics)
	}
	b.WriteString("  upstream: {responseHeaderTimeout: 120s, idleTimeout: 60s}\n")
	if t.Queue != nil {
		fmt.Fprintf(&b, "  queue: %s\n", t.Queue.manifest())
	}
	return b.String()
}

// routerProc is one running router.
type routerProc struct {
	proc *supervise.Process
	// front and admin are the HOST:PORT of its two listeners.
	front, admin string
	tiers        []tierSpec
}

// startRouter writes the tiers into dir and starts the router in files
// mode on ephemeral loopback ports, with the further flags extra, then
// waits until every member of every tier is ready.
func (s *supervisor) startRouter(bin, name, dir string, tiers []tierSpec, extra ...string) (*routerProc, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	var docs []string
	for _, t := range tiers {
		docs = append(docs, t.manifest())
	}
	if err := os.WriteFile(filepath.Join(dir, "tiers.yaml"), []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(filepath.Dir(dir), name+".token")
	if err := os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	r := &routerProc{tiers: tiers}
	args := []string{
		"--tiers-dir", dir,
		"--node-name", benchNode,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		// No handover grace: no second router takes over, and stopGrace
		// is shorter than the default grace.
		"--shutdown-grace", "0s",
		"--max-connections", benchMaxConnections,
		"--max-unauthenticated-connections", benchMaxConnections,
		// Profiles for the overhead scenario's breakdown; they are served on
		// the admin listener only, behind the token.
		"--admin-token-file", tokenFile,
		"--enable-pprof",
	}
	p, err := s.start(name, bin, startlines.RouterAddrs(&r.front, &r.admin), append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	r.proc = p
	err = s.poll("every router member ready", func() (bool, error) {
		c, err := r.capacity(s.ctx)
		if err != nil {
			return false, nil
		}
		for _, t := range tiers {
			tc, ok := tierOf(c, t.key())
			if !ok || len(tc.Members) != len(t.Engines) {
				return false, nil
			}
			for _, m := range tc.Members {
				if !m.Ready {
					return false, nil
				}
			}
		}
		return true, nil
	})
	return r, err
}

// url returns the router's OpenAI API root.
func (r *routerProc) url() string { return "http://" + r.front + "/v1" }

// tierOf returns the tier of c with the given key.
func tierOf(c adminapi.CapacityView, key string) (adminapi.TierCapacity, bool) {
	for _, t := range c.Tiers {
		if t.Tier == key {
			return t, true
		}
	}
	return adminapi.TierCapacity{}, false
}

// activeOf returns the leases held across every tier of c.
func activeOf(c adminapi.CapacityView) int {
	n := 0
	for _, t := range c.Tiers {
		n += t.Active
	}
	return n
}

// capacity reads the router's capacity view.
func (r *routerProc) capacity(ctx context.Context) (adminapi.CapacityView, error) {
	var c adminapi.CapacityView
	err := getJSON(ctx, "http://"+r.admin+"/admin/v1/capacity", &c)
	return c, err
}

// freshness returns the pressure freshness of every member of a tier,
// "none" for a member without pressure.
func (r *routerProc) freshness(ctx context.Context, key string) ([]string, error) {
	c, err := r.capacity(ctx)
	if err != nil {
		return nil, err
	}
	t, ok := tierOf(c, key)
	if !ok {
		return nil, fmt.Errorf("tier %s missing from the capacity view", key)
	}
	var out []string
	for _, m := range t.Members {
		f := "none"
		if m.Pressure != nil {
			f = m.Pressure.Freshness
		}
		out = append(out, f)
	}
	return out, nil
}

// goroutines returns the router's go_goroutines gauge from its /metrics,
// and false when the router does not expose it (no /metrics yet, or no Go
// collector).
func (r *routerProc) goroutines(ctx context.Context) (float64, bool, error) {
	return r.goMetric(ctx, "go_goroutines")
}

// mallocs returns the router's go_memstats_mallocs_total, the heap
// objects it allocated since it started, and false when it does not
// expose it.
func (r *routerProc) mallocs(ctx context.Context) (float64, bool, error) {
	return r.goMetric(ctx, "go_memstats_mallocs_total")
}

// goMetric returns the value of the single-sample gauge or counter name
// from the router's /metrics, and false when the router does not expose
// it.
func (r *routerProc) goMetric(ctx context.Context, name string) (float64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, false, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, false, nil
	}
	return parseGoMetric(body, name)
}

// parseGoMetric reads the single-sample gauge or counter name from
// Prometheus text exposition.
func parseGoMetric(body []byte, name string) (float64, bool, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, false, fmt.Errorf("router /metrics: %w", err)
	}
	f, ok := families[name]
	if !ok || len(f.GetMetric()) != 1 {
		return 0, false, nil
	}
	switch m := f.GetMetric()[0]; {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true, nil
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true, nil
	}
	return 0, false, nil
}

//go:build gie

package gie

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// The load of the proof.
const (
	// requests is how many requests the gateway sends.
	requests = 360
	// streamEvery makes every streamEvery-th request a stream.
	streamEvery = 4
	// concurrency is how many requests are in flight at once: more than
	// one node's ceilings (memberCeiling × members), so ceilings and
	// queues bind on whichever node the picker favours.
	concurrency = 12
	// memberCeiling is every member's maxConcurrency.
	memberCeiling = 2
	// queueMax is each tier's queue bound: above the whole load's
	// concurrency, so no request is refused for a full queue.
	queueMax = 32
	// minShare is the least share of the requests a node must get: a
	// third is even; a picker blind to one node would give it none.
	minShare = 0.10
)

// proofNodes are the nodes of the proof: three routers on their own
// loopback addresses, each in front of two engines with ceilings of
// memberCeiling and a queue.
func proofNodes() []nodeSpec {
	queue := &sluicev1.QueueSpec{MaxRequests: queueMax, MaxWait: &metav1.Duration{Duration: 20 * time.Second}}
	var specs []nodeSpec
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		specs = append(specs, nodeSpec{
			name: name, ip: fmt.Sprintf("127.0.0.%d", i+2),
			ceilings: []int32{memberCeiling, memberCeiling}, queue: queue,
		})
	}
	return specs
}

// pool is a running proof: the control plane, the nodes with their Pods,
// the InferencePool, the picker and the gateway in front of it.
type pool struct {
	cluster *cluster
	nodes   []*node
	gateway *gateway
}

// startPool starts the control plane, the nodes, their Pods and the
// InferencePool, then the picker, and waits until the picker holds every
// node. Everything stops when the test ends.
func startPool(t *testing.T, specs []nodeSpec) *pool {
	t.Helper()
	p := &pool{cluster: startControlPlane(t)}
	for _, s := range specs {
		n := startNode(t, s)
		p.cluster.addPod(t, n)
		p.nodes = append(p.nodes, n)
	}
	p.cluster.addPool(t)
	p.cluster.startPicker(t, p.nodes)
	p.gateway = newGateway(t)
	return p
}

// node returns the node whose front door is endpoint, or nil.
func (p *pool) node(endpoint string) *node {
	for _, n := range p.nodes {
		if n.endpoint() == endpoint {
			return n
		}
	}
	return nil
}

// result is a load's exchanges and the errors of those that failed.
type result struct {
	exchanges []exchange
	streams   []bool // streams[i]: exchange i was a stream
	errs      []error
}

// runLoad sends n requests through the gateway, concurrency at a time,
// every streamEvery-th a stream, and returns what the gateway saw.
func runLoad(t *testing.T, p *pool, n, concurrency int) result {
	t.Helper()
	r := result{exchanges: make([]exchange, n), streams: make([]bool, n), errs: make([]error, n)}
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				stream := i%streamEvery == 0
				body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"request %d"}],"max_tokens":8,"stream":%t}`, alias, i, stream)
				r.streams[i] = stream
				r.exchanges[i], r.errs[i] = p.gateway.do(t.Context(), fmt.Sprintf("gie-%04d", i), "/v1/chat/completions", []byte(body))
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return r
}

// nodeSummary is one node's line of a load's summary.
type nodeSummary struct {
	name, endpoint string
	requests       int // answered 200 by the node's router
	refusals       int // answered otherwise by the node's router
	share          float64
	p50, p99       time.Duration
}

// String is the line the docs quote.
func (s nodeSummary) String() string {
	return fmt.Sprintf("%s %s: requests %d, share %.1f%%, refusals %d, e2e p50 %v, p99 %v",
		s.name, s.endpoint, s.requests, 100*s.share, s.refusals, s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond))
}

// summary returns each node's line: the requests its router answered,
// their share of every request sent, its refusals, and the end-to-end
// latency (pick, relay and response) of the requests it answered.
func (r result) summary(p *pool) []nodeSummary {
	var out []nodeSummary
	for _, n := range p.nodes {
		s := nodeSummary{name: n.spec.name, endpoint: n.endpoint()}
		var lat []time.Duration
		for i, ex := range r.exchanges {
			if r.errs[i] != nil || ex.endpoint != n.endpoint() {
				continue
			}
			if ex.status != 200 {
				s.refusals++
				continue
			}
			s.requests++
			lat = append(lat, ex.elapsed)
		}
		s.share = float64(s.requests) / float64(len(r.exchanges))
		s.p50, s.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
		out = append(out, s)
	}
	return out
}

// percentile returns the q-quantile of d (nearest rank), 0 for none.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	i := int(q*float64(len(d))+0.5) - 1
	return d[max(0, min(i, len(d)-1))]
}

// TestPickerInFrontOfRouters is the proof that sluice routers are model
// servers GIE's picker chooses among: every request goes picker → chosen
// router → engine exactly once, streams complete, every node gets its
// share, and sluice's ceilings hold on every node; a node whose pod is
// not Ready is not chosen. It logs one summary line per node
// (docs/BENCHMARKS.md#511-the-cluster-picker).
//
// The scenarios that need the routers' model-server gauges (hidden load
// on one node's engines, a quiesced or saturated tier) are tests beside
// this one: startPool with nodeSpec.engineFlags (--hidden-load) or a
// queue, runLoad, then the shares of result.summary; pickerPods shows
// when the picker's view of each pod changed.
func TestPickerInFrontOfRouters(t *testing.T) {
	p := startPool(t, proofNodes())
	r := runLoad(t, p, requests, concurrency)

	t.Run("every request reaches one router and one engine once", func(t *testing.T) {
		served := map[string]map[string]uint64{} // node → member → requests answered 200
		for i, ex := range r.exchanges {
			switch {
			case r.errs[i] != nil:
				t.Errorf("request %d: %v", i, r.errs[i])
				continue
			case ex.pickerStatus != 0:
				t.Errorf("request %d: the picker refused it with %d", i, ex.pickerStatus)
				continue
			case p.node(ex.endpoint) == nil:
				t.Errorf("request %d: the picker chose %q, no node of the pool", i, ex.endpoint)
				continue
			case ex.status != 200:
				continue // A refusal: it reached no engine; summary counts it.
			}
			n := p.node(ex.endpoint)
			if served[n.spec.name] == nil {
				served[n.spec.name] = map[string]uint64{}
			}
			served[n.spec.name][ex.member]++
		}
		for _, n := range p.nodes {
			for _, e := range n.engines {
				if got, want := e.stats(t).TotalRequests, served[n.spec.name][e.member]; got != want {
					t.Errorf("%s: the engine served %d requests, the gateway saw %d answered by it", e.Name(), got, want)
				}
			}
		}
	})

	t.Run("streams end with [DONE]", func(t *testing.T) {
		streams := 0
		for i, ex := range r.exchanges {
			if !r.streams[i] || r.errs[i] != nil || ex.status != 200 {
				continue
			}
			streams++
			if !ex.done {
				t.Errorf("request %d: the stream through %s ended without data: [DONE]", i, ex.endpoint)
			}
		}
		if streams == 0 {
			t.Error("no stream was answered")
		}
	})

	summary := r.summary(p)
	t.Run("every node gets its share", func(t *testing.T) {
		for _, s := range summary {
			if s.share < minShare {
				t.Errorf("%s: share %.1f%%, want at least %.0f%%", s.name, 100*s.share, 100*minShare)
			}
		}
	})

	t.Run("ceilings hold on every node", func(t *testing.T) {
		for _, n := range p.nodes {
			var most []string
			for _, e := range n.engines {
				got := e.stats(t).MaxInFlight
				if got > int(e.ceiling) {
					t.Errorf("%s: %d requests in flight at once, ceiling %d", e.Name(), got, e.ceiling)
				}
				most = append(most, fmt.Sprintf("%s %d/%d", e.member, got, e.ceiling))
			}
			t.Logf("%s: most requests in flight at once per engine / ceiling: %s", n.spec.name, strings.Join(most, ", "))
		}
	})

	for _, s := range summary {
		t.Log(s)
	}

	// Last, as it adds to the engines' counts.
	t.Run("a node whose pod is not ready is not chosen", func(t *testing.T) {
		out := p.nodes[len(p.nodes)-1]
		start := time.Now()
		p.cluster.setReady(t, out, false)
		awaitPickerView(t, out, false)
		t.Logf("the picker dropped %s %v after its pod's Ready turned false", out.spec.name, time.Since(start).Round(time.Millisecond))
		before := servedBy(t, out)
		r := runLoad(t, p, readinessRequests, concurrency)
		for i, ex := range r.exchanges {
			if r.errs[i] != nil || ex.status != 200 {
				t.Errorf("request %d: status %d, %v", i, ex.status, r.errs[i])
			}
			if ex.endpoint == out.endpoint() {
				t.Errorf("request %d went to %s, whose pod is not ready", i, out.spec.name)
			}
		}
		if after := servedBy(t, out); after != before {
			t.Errorf("%s's engines served %d requests while its pod was not ready", out.spec.name, after-before)
		}
		start = time.Now()
		p.cluster.setReady(t, out, true)
		awaitPickerView(t, out, true)
		t.Logf("the picker took %s back %v after its pod's Ready turned true", out.spec.name, time.Since(start).Round(time.Millisecond))
	})
}

// readinessRequests is the load sent while one node's pod is not ready.
const readinessRequests = 60

// awaitPickerView waits until the picker holds the node's pod (held) or
// no longer does.
func awaitPickerView(t *testing.T, n *node, held bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("the picker holds %s: %v", n.spec.name, held), func() (bool, string) {
		pods, err := pickerPods()
		if err != nil {
			return false, err.Error()
		}
		_, ok := pods[n.spec.name]
		return ok == held, fmt.Sprintf("pods %v", pods)
	})
}

// servedBy is the requests the node's engines served so far.
func servedBy(t *testing.T, n *node) uint64 {
	t.Helper()
	var sum uint64
	for _, e := range n.engines {
		sum += e.stats(t).TotalRequests
	}
	return sum
}

//go:build gie

package gie

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// The hidden-load scenario.
const (
	// hiddenLoad is the slots of each engine of the busy node held by load
	// its router cannot see: with enginesim's defaults (16 slots, 1024 KV
	// tokens per hidden sequence, 16384 in all) its KV usage reads at
	// least 0.5, below the picker's saturation threshold (0.8), so the
	// picker still may choose it, and its prefill is 16 ms slower.
	hiddenLoad = 8
	// hiddenShareFactor bounds the busy node's share: at most this
	// fraction of the mean share of the others. Measured: see
	// docs/BENCHMARKS.md#511-the-cluster-picker.
	hiddenShareFactor = 0.5
)

// TestPickerAvoidsHiddenLoad holds that the picker reads the routers'
// model-server gauges: one node's engines carry load no router sees
// (enginesim's --hidden-load), which their KV cache usage reports, and
// the router's vllm:kv_cache_usage_perc with it; the picker sends that
// node measurably fewer requests than each of the others, and every
// request is still answered. It logs one summary line per node
// (docs/BENCHMARKS.md#511-the-cluster-picker).
func TestPickerAvoidsHiddenLoad(t *testing.T) {
	specs := proofNodes()
	busy := len(specs) - 1
	specs[busy].engineFlags = []string{"--hidden-load", fmt.Sprint(hiddenLoad)}
	p := startPool(t, specs)
	r := runLoad(t, p, requests, concurrency)
	for i, ex := range r.exchanges {
		if r.errs[i] != nil || ex.pickerStatus != 0 || ex.status != http.StatusOK {
			t.Errorf("request %d: picker %d, status %d, %v", i, ex.pickerStatus, ex.status, r.errs[i])
		}
	}
	summary := r.summary(p)
	for _, s := range summary {
		t.Log(s)
	}
	var others float64
	for i, s := range summary {
		if i != busy {
			others += s.share
		}
	}
	others /= float64(len(summary) - 1)
	if got := summary[busy].share; got > hiddenShareFactor*others {
		t.Errorf("%s, under hidden load: share %.1f%%, want at most %.0f%% of the others' mean %.1f%%",
			summary[busy].name, 100*got, 100*hiddenShareFactor, 100*others)
	}
}

// TestPickerDropsQuiescedTier holds that a node whose tier is quiesced
// stops being chosen, and comes back once readmitted. The tier is quiesced
// in files mode, by rewriting its file with spec.quiesce.tier
// (docs/API.md#21-fields); the router applies it at its next poll, its
// gauges leave /metrics and GET /readyz/NAMESPACE/NAME answers 503. In a
// cluster the kubelet's readinessProbe on that path turns the Pod's Ready
// condition false and the picker's Pod watch drops the pod; here the
// test's readiness mirror plays the kubelet. It logs how long after the
// quiesce the last request was routed there, and the refusals meanwhile
// (docs/BENCHMARKS.md#511-the-cluster-picker).
func TestPickerDropsQuiescedTier(t *testing.T) {
	p := startPool(t, proofNodes())
	out := p.nodes[len(p.nodes)-1]
	mirrorReadiness(t, p.cluster, out)

	load := startSteadyLoad(t, p, concurrency)
	quiesced := time.Now()
	out.writeTier(t, "maintenance")
	awaitPickerView(t, out, false)
	dropped := time.Now()
	// Requests keep flowing after the picker's view changed, to show none
	// of them goes to the quiesced node.
	load.await(t, quiescedRequests)
	sent := load.stop()

	var last time.Time
	var refused, after int
	for _, x := range sent {
		switch {
		case x.err != nil:
			t.Errorf("request %s: %v", x.id, x.err)
			continue
		case x.ex.endpoint != out.endpoint():
			if x.start.After(dropped) {
				after++
			}
			continue
		}
		if x.start.After(dropped) {
			t.Errorf("request %s went to %s, started %v after the picker dropped it", x.id, out.spec.name, x.start.Sub(dropped))
		}
		if x.start.After(quiesced) {
			last = x.start
			if x.ex.status != http.StatusOK {
				refused++
			}
		}
	}
	if after == 0 {
		t.Error("no request was sent after the picker dropped the quiesced node")
	}
	lastAfter := "none"
	if !last.IsZero() {
		lastAfter = last.Sub(quiesced).Round(time.Millisecond).String()
	}
	t.Logf("%s quiesced: the picker dropped it %v after the file was written; the last request routed there started %s after; %d of those refused; %d requests after, none there",
		out.spec.name, dropped.Sub(quiesced).Round(time.Millisecond), lastAfter, refused, after)

	readmitted := time.Now()
	out.writeTier(t, "")
	awaitPickerView(t, out, true)
	t.Logf("%s readmitted: back in the picker's view %v after the file was written", out.spec.name, time.Since(readmitted).Round(time.Millisecond))
	r := runLoad(t, p, readinessRequests, concurrency)
	for _, s := range r.summary(p) {
		if s.name == out.spec.name && s.requests == 0 {
			t.Errorf("%s: no request of %d after readmission", s.name, readinessRequests)
		}
	}
}

// quiescedRequests is how many requests the steady load sends after the
// picker dropped the quiesced node.
const quiescedRequests = 60

// readinessProbePeriod is how often the readiness mirror probes: a
// kubelet's readinessProbe period is a second at least, so a cluster adds
// up to periodSeconds × failureThreshold to the times the test measures.
const readinessProbePeriod = 100 * time.Millisecond

// mirrorReadiness plays the kubelet's readinessProbe for the node's Pod:
// it polls the router's GET /readyz/NAMESPACE/NAME and sets the Pod's
// Ready condition when the answer changes, until the test ends. Polling
// a real process is the only way to observe it.
func mirrorReadiness(t *testing.T, c *cluster, n *node) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	url := "http://" + n.admin + "/readyz/" + tierNamespace + "/" + tierName
	go func() {
		defer close(done)
		ticker := time.NewTicker(readinessProbePeriod)
		defer ticker.Stop()
		ready := true // addPod made the Pod Ready.
		for {
			_, err := get(url)
			if now := err == nil; now != ready {
				if err := c.updateReady(ctx, n, now); err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: readiness mirror: %v", n.spec.name, err)
					}
					return
				}
				ready = now
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
}

// sentRequest is one request of a steady load: when the gateway asked the
// picker, and what it saw.
type sentRequest struct {
	id    string
	start time.Time
	ex    exchange
	err   error
}

// steadyLoad sends requests through the gateway, concurrency at a time,
// until stopped.
type steadyLoad struct {
	mu     sync.Mutex
	sent   []sentRequest
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startSteadyLoad starts a steady load; it stops when the test ends, if
// not before.
func startSteadyLoad(t *testing.T, p *pool, concurrency int) *steadyLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &steadyLoad{cancel: cancel}
	ids := make(chan int)
	l.wg.Go(func() {
		defer close(ids)
		for i := 0; ; i++ {
			select {
			case ids <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range concurrency {
		l.wg.Go(func() {
			for i := range ids {
				x := sentRequest{id: fmt.Sprintf("gie-steady-%05d", i), start: time.Now()}
				body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"request %d"}],"max_tokens":8}`, alias, i)
				x.ex, x.err = p.gateway.do(context.WithoutCancel(ctx), x.id, "/v1/chat/completions", []byte(body))
				l.mu.Lock()
				l.sent = append(l.sent, x)
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() { l.stop() })
	return l
}

// await waits until n more requests have ended.
func (l *steadyLoad) await(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	want := len(l.sent) + n
	l.mu.Unlock()
	eventually(t, fmt.Sprintf("%d more requests", n), func() (bool, string) {
		l.mu.Lock()
		got := len(l.sent)
		l.mu.Unlock()
		return got >= want, fmt.Sprintf("%d of %d", got, want)
	})
}

// stop stops the load, waits for its requests to end and returns them.
func (l *steadyLoad) stop() []sentRequest {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

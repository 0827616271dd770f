//go:build gie

package gie

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/telemetry"
)

// saturatedRequests is the load sent while one node is saturated, and
// again once it has room.
const saturatedRequests = 60

// TestPickerSkipsSaturatedTier holds that a node whose tier is saturated
// stops being chosen while the others have room, and that the picker's
// view reads it below saturation once it has room again. The node's tier has no queue and members with a ceiling of
// one; two requests sent straight to its router, past the picker (as
// another gateway's would be), stall on its engines (enginesim's
// X-Enginesim-Fault: stall) and hold both ceilings. The router then reads
// saturated (vllm:num_requests_waiting at least 5, KV 1): at its next
// scrape the picker's queue and KV-cache scorers give the pod the least
// score there is (the most waiting, a full cache), so the max-score picker
// takes another. It logs how long after the tier was full the picker's
// view read it saturated, and after the stalled requests ended that it
// had room (docs/BENCHMARKS.md#511-the-cluster-picker).
func TestPickerSkipsSaturatedTier(t *testing.T) {
	specs := proofNodes()
	full := len(specs) - 1
	specs[full].ceilings = []int32{1, 1}
	specs[full].queue = nil
	specs[full].engineFlags = []string{"--allow-fault-header"}
	p := startPool(t, specs)
	out := p.nodes[full]

	ctx, release := context.WithCancel(t.Context())
	for i := range specs[full].ceilings {
		holdStalled(ctx, t, out, i)
	}
	filled := time.Now()
	awaitPickerQueue(t, out, func(q float64) bool { return q >= telemetry.SaturatedWaiting })
	t.Logf("%s saturated: the picker read its queue at %d or more %v after its tier was full",
		out.spec.name, telemetry.SaturatedWaiting, time.Since(filled).Round(time.Millisecond))
	before := servedBy(t, out)
	r := runLoad(t, p, saturatedRequests, concurrency)
	for i, ex := range r.exchanges {
		if r.errs[i] != nil || ex.pickerStatus != 0 || ex.status != http.StatusOK {
			t.Errorf("request %d: picker %d, status %d, %v", i, ex.pickerStatus, ex.status, r.errs[i])
		}
		if ex.endpoint == out.endpoint() {
			t.Errorf("request %d went to %s, which is saturated", i, out.spec.name)
		}
	}
	if got := servedBy(t, out) - before; got != 0 {
		t.Errorf("%s's engines served %d requests while saturated", out.spec.name, got)
	}

	release()
	freed := time.Now()
	awaitPickerQueue(t, out, func(q float64) bool { return q < telemetry.SaturatedWaiting })
	t.Logf("%s has room: the picker read its queue below %d %v after the stalled requests ended",
		out.spec.name, telemetry.SaturatedWaiting, time.Since(freed).Round(time.Millisecond))
	// Once it has room the node is a candidate again, but whether the
	// picker's scorers prefer it for the next requests depends on the
	// others' load at that moment: the shares are logged, not judged.
	r = runLoad(t, p, saturatedRequests, concurrency)
	for i, ex := range r.exchanges {
		if r.errs[i] != nil || ex.pickerStatus != 0 {
			t.Errorf("request %d once %s had room: picker %d, %v", i, out.spec.name, ex.pickerStatus, r.errs[i])
		}
	}
	for _, s := range r.summary(p) {
		t.Log(s)
	}
	for _, e := range out.engines {
		if got := e.stats(t).MaxInFlight; got > int(e.ceiling) {
			t.Errorf("%s: %d requests in flight at once, ceiling %d", e.Name(), got, e.ceiling)
		}
	}
}

// holdStalled sends the node's router a stream whose engine stalls after
// its first token, and returns once the router answered its headers: the
// request holds a lease until ctx ends. The test's end waits for it.
func holdStalled(ctx context.Context, t *testing.T, n *node, i int) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"stalled %d"}],"max_tokens":8,"stream":true}`, alias, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.front+"/v1/chat/completions", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Enginesim-Fault", "stall")
	resp, err := adminClient.Do(req) //nolint:bodyclose // closed by the goroutine below.
	if err != nil {
		t.Fatalf("%s: stalled request %d: %v", n.spec.name, i, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		_ = resp.Body.Close()
	}()
	t.Cleanup(func() { <-done })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: stalled request %d: status %d", n.spec.name, i, resp.StatusCode)
	}
}

// awaitPickerQueue waits until the queue the picker last read from the
// node's pod satisfies ok.
func awaitPickerQueue(t *testing.T, n *node, ok func(float64) bool) {
	t.Helper()
	eventually(t, n.spec.name+": the picker's queue", func() (bool, string) {
		pods, err := pickerPods()
		if err != nil {
			return false, err.Error()
		}
		q, held := pods[n.spec.name]
		return held && ok(q), fmt.Sprintf("pods %v", pods)
	})
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

// queueSpec is a spec.queue of maxRequests and maxWait.
func queueSpec(maxRequests int32, maxWait time.Duration) *sluicev1.QueueSpec {
	return &sluicev1.QueueSpec{MaxRequests: maxRequests, MaxWait: &metav1.Duration{Duration: maxWait}}
}

// TestQueueBurstServedWithoutRefusals sends a burst of four times the
// tier's ceiling through the router binary to three engines whose slots
// equal their members' ceilings: with a queue whose maxWait covers the
// burst, every request is served and none refused, and no engine ever
// holds more than its ceiling (its own count of requests in its handler).
func TestQueueBurstServedWithoutRefusals(t *testing.T) {
	const ceiling, burst = 2, 4 * 3 * 2
	extra := []string{"--max-num-seqs", fmt.Sprint(ceiling), "--ttft-base", "20ms", "--itl-base", "2ms"}
	engines := []*engine{startEngine(t, "engine-a", extra...), startEngine(t, "engine-b", extra...), startEngine(t, "engine-c", extra...)}
	var members []member
	for i, e := range engines {
		members = append(members, member{fmt.Sprintf("m%d", i), e, ceiling})
	}
	tr := tier{name: "queued", alias: "e2e-queued", strategy: sluicev1.StrategyCapacity, members: members, queue: queueSpec(64, 30*time.Second)}
	r := startRouter(t, tr)
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		BaseURL: r.baseURL(), Model: tr.alias, MaxTokens: 16,
		Concurrency: burst, Requests: 10 * burst, RequestTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sent, %d succeeded, statuses %v, errors %v", res.Sent, res.Succeeded, res.Statuses, res.Errors)
	if res.Succeeded != res.Sent || res.Statuses[http.StatusServiceUnavailable] != 0 || res.Statuses[http.StatusTooManyRequests] != 0 {
		t.Errorf("%d of %d succeeded, statuses %v: want every request served, none refused", res.Succeeded, res.Sent, res.Statuses)
	}
	for _, e := range engines {
		if s := e.stats(t); s.MaxInFlight > ceiling || s.Waiting > 0 {
			t.Errorf("%s held %d at once (waiting %d), past its ceiling of %d", e.Name(), s.MaxInFlight, s.Waiting, ceiling)
		}
	}
	r.awaitActive(t, tr.key(), 0)
}

// TestQueueBoundsThroughRouter: through the router binary, a request past
// the queue's maxRequests gets 429 queue_full and one that waits maxWait
// gets 503 queue_timeout, each with Retry-After, while the member serves
// the request it holds.
func TestQueueBoundsThroughRouter(t *testing.T) {
	// One slot, a request of about 4 s: the first request holds the member
	// for the whole test.
	e := startEngine(t, "engine-slow", "--max-num-seqs", "1", "--ttft-base", "4s")
	tr := tier{name: "bounded", alias: "e2e-bounded", members: []member{{"m0", e, 1}}, queue: queueSpec(1, time.Second)}
	r := startRouter(t, tr)
	url := r.baseURL() + "/chat/completions"
	body := `{"model":"e2e-bounded","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	held := make(chan rawResponse, 1)
	go func() {
		resp, _ := postJSON(context.Background(), url, body)
		held <- resp
	}()
	r.awaitActive(t, tr.key(), 1)
	var wg sync.WaitGroup
	replies := make(chan rawResponse, 2)
	for range 2 {
		wg.Go(func() {
			resp, err := postJSON(context.Background(), url, body)
			if err != nil {
				t.Error(err)
			}
			replies <- resp
		})
	}
	wg.Wait()
	close(replies)
	codes := map[string]int{}
	for resp := range replies {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(resp.body, &e)
		codes[fmt.Sprint(resp.status, " ", e.Error.Code)]++
		if resp.header.Get("Retry-After") != "1" {
			t.Errorf("%d %s without Retry-After: 1", resp.status, resp.body)
		}
	}
	if codes["429 queue_full"] != 1 || codes["503 queue_timeout"] != 1 {
		t.Errorf("replies %v, want one 429 queue_full and one 503 queue_timeout", codes)
	}
	if resp := <-held; resp.status != http.StatusOK {
		t.Errorf("the held request: %d %s", resp.status, resp.body)
	}
	if s := e.stats(t); s.TotalRequests != 1 {
		t.Errorf("the engine saw %d requests, want 1: refused requests never reach it", s.TotalRequests)
	}
	r.awaitActive(t, tr.key(), 0)
}

// TestQueueClientLeavesFreesItsPlace: through the router binary, a client
// that gives up while its request waits frees its place in the queue at
// once (the capacity view's depth drops to 0 while the member is still
// busy), the request never reaches the engine, and the next request takes
// the freed place.
func TestQueueClientLeavesFreesItsPlace(t *testing.T) {
	e := startEngine(t, "engine-slow", "--max-num-seqs", "1", "--ttft-base", "4s")
	tr := tier{name: "leaving", alias: "e2e-leaving", members: []member{{"m0", e, 1}}, queue: queueSpec(1, time.Minute)}
	r := startRouter(t, tr)
	url := r.baseURL() + "/chat/completions"
	body := `{"model":"e2e-leaving","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	held := make(chan rawResponse, 1)
	go func() {
		resp, _ := postJSON(context.Background(), url, body)
		held <- resp
	}()
	r.awaitActive(t, tr.key(), 1)
	waiting := func(want int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d waiting in %s", want, tr.key()), func() (bool, string) {
			v, err := r.tierCapacity(tr.key())
			if err != nil {
				return false, err.Error()
			}
			return v.Queue.Waiting == want, fmt.Sprintf("queue %+v", v.Queue)
		})
	}
	ctx, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := postJSON(ctx, url, body)
		left <- err
	}()
	waiting(1)
	leave()
	if err := <-left; err == nil {
		t.Fatal("the client that left got a response")
	}
	waiting(0)
	if v, err := r.tierCapacity(tr.key()); err != nil || v.Active != 1 {
		t.Fatalf("capacity %+v, %v: want the held request still the only lease", v, err)
	}
	// The freed place takes the next request, which is served after the
	// held one.
	next := make(chan rawResponse, 1)
	go func() {
		resp, _ := postJSON(context.Background(), url, body)
		next <- resp
	}()
	waiting(1)
	for _, c := range []chan rawResponse{held, next} {
		if resp := <-c; resp.status != http.StatusOK {
			t.Errorf("%d %s, want 200", resp.status, resp.body)
		}
	}
	if s := e.stats(t); s.TotalRequests != 2 {
		t.Errorf("the engine saw %d requests, want 2: the one whose client left never reaches it", s.TotalRequests)
	}
	r.awaitActive(t, tr.key(), 0)
}

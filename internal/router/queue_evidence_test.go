package router

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/evidence"
)

// queuedFixture is a router on a fake clock with the direct tier ns/q: one
// member, gpu0, with a ceiling of 1 and an admission queue of maxRequests
// 2 and maxWait 1m. A request with X-Hold holds its lease until release
// is closed.
type queuedFixture struct {
	*fixture
	clk     *clocktesting.FakeClock
	tier    *tiers.Tier
	gpu0    *fakeMember
	release chan struct{}
	queued  chan struct{}  // a send each time a request starts waiting.
	done    chan reply     // the replies of the requests sent by wait.
	held    *http.Response // the request hold sent, until serve.
}

func newQueuedFixture(t *testing.T) *queuedFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	queued := make(chan struct{}, 8)
	f := newFixture(t, fixtureOptions{clock: clk, decisionFile: filepath.Join(t.TempDir(), "decisions.jsonl"),
		admission: []admission.Option{admission.WithQueued(func() { queued <- struct{}{} })}})
	release := make(chan struct{})
	gpu0 := newUpstream(t, "gpu0", nil)
	gpu0.handle(holdOrAnswer(release))
	f.apply(sourcetest.Tier("ns/q", []string{"q"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}}, withQueue(2, time.Minute, 0)))
	ts, _ := f.rt.Tiers().Table().Lookup("ns/q")
	return &queuedFixture{fixture: f, clk: clk, tier: ts, gpu0: gpu0, release: release, queued: queued, done: make(chan reply, 8)}
}

// wait sends a request in the background, its reply to q.done, and returns
// once it is the nth request waiting in ns/q's queue.
func (q *queuedFixture) wait(n int) {
	q.t.Helper()
	go func() { r, _ := q.mustPost(pathChatCompletions, chat("q"), nil); q.done <- r }()
	q.waitQueued(n)
}

// serve lets the held request, and then the n requests waiting behind it,
// be served whole: each is answered 200 and its outcome recorded.
func (q *queuedFixture) serve(n int) {
	q.t.Helper()
	close(q.release)
	_, _ = io.Copy(io.Discard, q.held.Body)
	_ = q.held.Body.Close()
	for range n {
		if r := <-q.done; r.StatusCode != http.StatusOK {
			q.t.Errorf("queued request = %d", r.StatusCode)
		}
	}
	for range n + 1 {
		q.outcome()
	}
}

// hold sends a request that holds gpu0's only lease until serve; it
// returns once the member answered its headers.
func (q *queuedFixture) hold() {
	q.t.Helper()
	resp, err := q.post(context.Background(), pathChatCompletions, chat("q"), http.Header{"X-Hold": {"1"}}) //nolint:bodyclose // serve closes it.
	if err != nil {
		q.t.Fatalf("held request: %v", err)
	}
	q.held = resp
	if resp.StatusCode != http.StatusOK {
		q.t.Fatalf("held request: %d", resp.StatusCode)
	}
}

// waitQueued waits until the next request starts waiting in ns/q's queue,
// and checks that n then wait.
func (q *queuedFixture) waitQueued(n int) {
	q.t.Helper()
	select {
	case <-q.queued:
	case <-time.After(failSafe):
		q.t.Fatal("no request started waiting")
	}
	if got := q.tier.Admission().QueueStats().Waiting; got != n {
		q.t.Fatalf("%d requests waiting, want %d", got, n)
	}
}

// capacityQueue returns ns/q's queue in GET /admin/v1/capacity.
func (q *queuedFixture) capacityQueue() adminapi.TierQueue {
	q.t.Helper()
	status, body := q.adminGet("/admin/v1/capacity", nil)
	var view adminapi.CapacityView
	if err := json.Unmarshal(body, &view); err != nil || status != http.StatusOK || len(view.Tiers) != 1 {
		q.t.Fatalf("capacity = %d %s (%v)", status, body, err)
	}
	return view.Tiers[0].Queue
}

// TestAdminCapacityQueue checks the capacity view's queue: the bound, the
// requests waiting and the oldest wait read off the router's clock,
// without the bound for a tier that has no queue.
func TestAdminCapacityQueue(t *testing.T) {
	q := newQueuedFixture(t)
	two := 2
	want := func(waiting int, oldestMS int64) adminapi.TierQueue {
		return adminapi.TierQueue{MaxRequests: &two, Waiting: waiting, OldestWaitMillis: oldestMS}
	}
	same := func(a, b adminapi.TierQueue) bool {
		return a.Waiting == b.Waiting && a.OldestWaitMillis == b.OldestWaitMillis &&
			(a.MaxRequests == nil) == (b.MaxRequests == nil) && (a.MaxRequests == nil || *a.MaxRequests == *b.MaxRequests)
	}
	if got := q.capacityQueue(); !same(got, want(0, 0)) {
		t.Fatalf("idle queue = %+v, want %+v", got, want(0, 0))
	}
	q.hold()
	q.wait(1)
	q.clk.Step(1500 * time.Millisecond) // the first waiter is the older by 1.5 s.
	q.wait(2)
	q.clk.Step(500 * time.Millisecond)
	status, body := q.adminGet("/admin/v1/capacity", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"queue": {
        "max_requests": 2,
        "waiting": 2,
        "oldest_wait_ms": `) {
		t.Fatalf("capacity = %d\n%s", status, body)
	}
	if got := q.capacityQueue(); !same(got, want(2, 2000)) {
		t.Fatalf("queue = %+v, want %+v", got, want(2, 2000))
	}
	q.serve(2)
	if got := q.capacityQueue(); !same(got, want(0, 0)) {
		t.Fatalf("drained queue = %+v, want %+v", got, want(0, 0))
	}
	if err := q.tier.Admission().Reconfigure(admission.Config{Members: []admission.MemberConfig{{ID: "gpu0", MaxConcurrency: 1}}}); err != nil {
		t.Fatal(err)
	}
	status, body = q.adminGet("/admin/v1/capacity", nil)
	if status != http.StatusOK || strings.Contains(string(body), "max_requests") {
		t.Fatalf("a tier without a queue shows a bound: %s", body)
	}
}

// TestQueueEvidence checks the decision records, their JSONL file and
// the access lines of requests that met the queue: admitted after waiting
// (queue=admitted and the wait), refused because the queue is full
// (queue=queue_full, 429, no wait), and of a request admitted at once (no
// queue attribute at all).
func TestQueueEvidence(t *testing.T) {
	q := newQueuedFixture(t)
	q.hold()
	q.wait(1)
	q.wait(2)
	full, _ := q.mustPost(pathChatCompletions, chat("q"), nil)
	if full.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third waiter = %d, want 429", full.StatusCode)
	}
	check := func(o Outcome, queue evidence.QueueOutcome, queued time.Duration) {
		t.Helper()
		if o.Queue != QueueEnd(queue) || o.Queued != queued {
			t.Errorf("%s: outcome queue %q queued %v, want %q %v", o.RequestID, o.Queue, o.Queued, queue, queued)
		}
		rec, ok := q.evidence.Find(o.RequestID)
		if !ok {
			t.Fatalf("%s: no decision record", o.RequestID)
		}
		m := recordJSON(t, rec)
		line := rec.String()
		if queue == "" {
			if _, has := m["queue"]; has || strings.Contains(line, "queue") {
				t.Errorf("%s: a request that never met the queue has queue evidence: %v / %s", o.RequestID, m, line)
			}
			return
		}
		if m["queue"] != string(queue) || m["queued_us"] != float64(queued.Microseconds()) {
			t.Errorf("%s: record queue %v queued_us %v, want %s %d", o.RequestID, m["queue"], m["queued_us"], queue, queued.Microseconds())
		}
		if suffix := " queue=" + string(queue) + " queued=" + queued.String(); !strings.HasSuffix(line, suffix) {
			t.Errorf("%s: line %s, want the suffix %q", o.RequestID, line, suffix)
		}
	}
	o := q.outcome()
	if o.Code != "queue_full" || o.Status != http.StatusTooManyRequests {
		t.Fatalf("full: %+v", o)
	}
	check(o, evidence.QueueFull, 0)

	q.clk.Step(2 * time.Second)
	close(q.release)
	_, _ = io.Copy(io.Discard, q.held.Body)
	_ = q.held.Body.Close()
	for range 2 {
		if r := <-q.done; r.StatusCode != http.StatusOK {
			t.Errorf("queued request = %d", r.StatusCode)
		}
	}
	atOnce := 0
	for range 3 { // the held request and the two waiters, in any order.
		switch o := q.outcome(); o.Queue {
		case "":
			atOnce++
			check(o, "", 0)
		default:
			check(o, evidence.QueueAdmitted, 2*time.Second)
		}
	}
	if atOnce != 1 {
		t.Errorf("%d requests admitted at once, want 1", atOnce)
	}
	if logs := q.logs.String(); strings.Count(logs, `"queue":"admitted"`) != 2 || strings.Count(logs, `"queue":"queue_full"`) != 1 {
		t.Errorf("access lines:\n%s", logs)
	}
	if err := q.sink.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Clean(q.sinkPath))
	if err != nil {
		t.Fatal(err)
	}
	s, err := evidence.SummarizeJSONL(bytes.NewReader(data))
	if err != nil || s.Records != 4 || s.InvalidRecords != 0 || s.RefusalReasons["queue_full"] != 1 {
		t.Fatalf("the decision file does not ingest cleanly: %+v, %v\n%s", s, err, data)
	}
}

// TestQueueEndsAreTheRecordsOutcomes checks the router's QueueEnd values
// are exactly the decision record's closed set of queue outcomes, which
// the metrics export at zero.
func TestQueueEndsAreTheRecordsOutcomes(t *testing.T) {
	ends := []QueueEnd{QueueAdmitted, QueueTimeout, QueueFull, QueueClientGone, QueueRefused}
	if len(ends) != len(evidence.QueueOutcomes) {
		t.Fatalf("%d queue ends, %d record outcomes", len(ends), len(evidence.QueueOutcomes))
	}
	for i, e := range ends {
		if string(e) != string(evidence.QueueOutcomes[i]) {
			t.Errorf("queue end %q, record outcome %q", e, evidence.QueueOutcomes[i])
		}
	}
}

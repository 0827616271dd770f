package router

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// queueFixture is a fixture serving ns/llama from n members with ceiling
// 1 each and the given queue. Its admission reports each request that
// starts waiting on queued; its members report each request's X-Test-Name
// on arrived and answer it when the test sends on free.
type queueFixture struct {
	*fixture
	queued  chan struct{}
	arrived chan string
	free    chan struct{}
	ups     []*fakeMember
}

func newQueueFixture(t *testing.T, o fixtureOptions, n int, queue func(*v1alpha1.ReplicaTierSpec)) *queueFixture {
	t.Helper()
	queued := make(chan struct{}, 64)
	o.admission = []admission.Option{admission.WithQueued(func() { queued <- struct{}{} })}
	qf := &queueFixture{fixture: newFixture(t, o), queued: queued, arrived: make(chan string, 64), free: make(chan struct{}, 64)}
	var members []sourcetest.Member
	for _, id := range []string{"gpu0", "gpu1", "gpu2"}[:n] {
		up := newUpstream(t, id, nil)
		up.handle(func(w http.ResponseWriter, r *http.Request) {
			qf.arrived <- r.Header.Get("X-Test-Name")
			<-qf.free
			_, _ = io.WriteString(w, "{}")
		})
		qf.ups = append(qf.ups, up)
		members = append(members, sourcetest.Member{ID: id, Endpoint: up.srv.URL, Max: 1})
	}
	qf.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity, members, queue))
	return qf
}

// sent is one request sent in the background; its reply arrives on done.
type sent struct {
	done   chan sentReply
	cancel context.CancelFunc
}

type sentReply struct {
	status int
	body   string
	header http.Header
	err    error
}

// send posts a chat request for llama in the background, named name (the
// X-Test-Name header) and with header.
func (qf *queueFixture) send(name string, header http.Header) *sent {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sent{done: make(chan sentReply, 1), cancel: cancel}
	h := http.Header{"X-Test-Name": {name}}
	for k, v := range header {
		h[k] = v
	}
	go func() {
		resp, err := qf.post(ctx, pathChatCompletions, chat("llama"), h)
		if err != nil {
			s.done <- sentReply{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		s.done <- sentReply{status: resp.StatusCode, body: string(body), header: resp.Header}
	}()
	return s
}

// hold sends a request and returns once it reached a member, where it stays
// until a send on free.
func (qf *queueFixture) hold(t *testing.T, name string, header http.Header) *sent {
	t.Helper()
	s := qf.send(name, header)
	select {
	case got := <-qf.arrived:
		if got != name {
			t.Fatalf("%s reached a member, want %s", got, name)
		}
	case r := <-s.done:
		t.Fatalf("%s ended: %+v", name, r)
	case <-time.After(failSafe):
		t.Fatalf("%s never reached a member", name)
	}
	return s
}

// wait sends a request and returns once it waits in the queue.
func (qf *queueFixture) wait(t *testing.T, name string, header http.Header) *sent {
	t.Helper()
	s := qf.send(name, header)
	select {
	case <-qf.queued:
	case r := <-s.done:
		t.Fatalf("%s did not wait: %+v", name, r)
	case <-time.After(failSafe):
		t.Fatalf("%s never started waiting", name)
	}
	return s
}

// next returns the name of the next request to reach a member.
func (qf *queueFixture) next(t *testing.T) string {
	t.Helper()
	select {
	case name := <-qf.arrived:
		return name
	case <-time.After(failSafe):
		t.Fatal("no request reached a member")
		return ""
	}
}

// reply returns the reply of s or fails the test.
func (s *sent) reply(t *testing.T) sentReply {
	t.Helper()
	select {
	case r := <-s.done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(failSafe):
		t.Fatal("no reply")
		return sentReply{}
	}
}

// queueStats returns ns/llama's queue state.
func (qf *queueFixture) queueStats() admission.QueueStats {
	ts, _ := qf.rt.Tiers().Table().Lookup("ns/llama")
	return ts.Admission().QueueStats()
}

// TestQueueServesBurst: a burst of four times the tier's ceiling waits in
// the queue and is served whole, never more than one request per member at
// once, the waiting ones recorded as admitted from the queue.
func TestQueueServesBurst(t *testing.T) {
	qf := newQueueFixture(t, fixtureOptions{}, 2, withQueue(16, time.Minute, 0))
	all := []*sent{qf.hold(t, "h0", nil), qf.hold(t, "h1", nil)}
	for i := range 6 {
		all = append(all, qf.wait(t, fmt.Sprint("w", i), nil))
	}
	if s := qf.queueStats(); s.Waiting != 6 || s.MaxRequests != 16 {
		t.Fatalf("queue %+v, want 6 of 16 waiting", s)
	}
	for range all {
		qf.free <- struct{}{}
	}
	for _, s := range all {
		if r := s.reply(t); r.status != http.StatusOK {
			t.Errorf("reply %d %s, want 200", r.status, r.body)
		}
	}
	queued := 0
	for range all {
		o := qf.outcome()
		if o.Result != ResultAdmitted || o.End != EndComplete {
			t.Errorf("outcome %+v", o)
		}
		if o.Queue == QueueAdmitted {
			queued++
		}
	}
	if queued != 6 {
		t.Errorf("%d outcomes admitted from the queue, want 6", queued)
	}
	for _, u := range qf.ups {
		if h := u.high.Load(); h > 1 {
			t.Errorf("member %s served %d at once, past its ceiling of 1", u.id, h)
		}
	}
	qf.assertIdle("ns/llama")
}

// TestQueueFullIs429: beyond the tenant's share, or maxRequests, the router
// answers 429 queue_full with Retry-After and reaches no member; a tenant
// under its share still waits, and the tenants take turns.
func TestQueueFullIs429(t *testing.T) {
	keys, err := apikeys.Parse([]byte("heavy-key tenant=heavy\nlight-key tenant=light\n"))
	if err != nil {
		t.Fatal(err)
	}
	qf := newQueueFixture(t, fixtureOptions{keys: keys}, 1, withQueue(3, time.Minute, 2))
	heavy := http.Header{"Authorization": {"Bearer heavy-key"}}
	light := http.Header{"Authorization": {"Bearer light-key"}}
	all := []*sent{qf.hold(t, "held", heavy), qf.wait(t, "h1", heavy), qf.wait(t, "h2", heavy)}
	refused := func(header http.Header, what string) {
		t.Helper()
		resp, body := qf.mustPost(pathChatCompletions, chat("llama"), header)
		if resp.StatusCode != http.StatusTooManyRequests || apierrortest.Code(t, body) != "queue_full" || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s: %d %s %v, want 429 queue_full with Retry-After: 1", what, resp.StatusCode, body, resp.Header)
		}
		if o := qf.outcome(); o.Result != ResultNotAdmitted || o.Queue != QueueFull || o.Code != "queue_full" || o.Member != "" {
			t.Errorf("%s: outcome %+v", what, o)
		}
	}
	refused(heavy, "a third heavy request")
	all = append(all, qf.wait(t, "l1", light))
	refused(light, "a request past maxRequests")
	var order []string
	for range all {
		qf.free <- struct{}{}
		if len(order) < len(all)-1 {
			order = append(order, qf.next(t))
		}
	}
	if got, want := fmt.Sprint(order), "[h1 l1 h2]"; got != want {
		t.Errorf("dispatch order %s, want %s", got, want)
	}
	for _, s := range all {
		if r := s.reply(t); r.status != http.StatusOK {
			t.Errorf("reply %d %s", r.status, r.body)
		}
	}
	if got := qf.ups[0].requests.Load(); got != 4 {
		t.Errorf("the member saw %d requests, want 4: no refused request reaches it", got)
	}
	qf.assertIdle("ns/llama")
}

// TestQueueTimeoutIs503: a request that waits maxWait by the router's clock
// gets 503 queue_timeout with Retry-After, holds no lease and never reaches
// a member.
func TestQueueTimeoutIs503(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	qf := newQueueFixture(t, fixtureOptions{clock: clk}, 1, withQueue(4, 2*time.Second, 0))
	held := qf.hold(t, "held", nil)
	late := qf.wait(t, "late", nil)
	clk.Step(2 * time.Second)
	r := late.reply(t)
	if r.status != http.StatusServiceUnavailable || apierrortest.Code(t, []byte(r.body)) != "queue_timeout" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("after maxWait: %d %s %v, want 503 queue_timeout with Retry-After: 1", r.status, r.body, r.header)
	}
	o := qf.outcome()
	if o.Result != ResultNotAdmitted || o.Queue != QueueTimeout || o.Queued != 2*time.Second || o.Member != "" {
		t.Errorf("outcome %+v, want not admitted after a 2s wait", o)
	}
	qf.free <- struct{}{}
	if r := held.reply(t); r.status != http.StatusOK {
		t.Errorf("held: %d %s", r.status, r.body)
	}
	qf.outcome()
	if got := qf.ups[0].requests.Load(); got != 1 {
		t.Errorf("the member saw %d requests, want 1", got)
	}
	qf.assertIdle("ns/llama")
}

// TestQueueClientGone: a client that leaves while its request waits frees
// its place at once; the request is recorded client_gone, holds no lease
// and never reaches a member, and the request behind it is served next.
func TestQueueClientGone(t *testing.T) {
	qf := newQueueFixture(t, fixtureOptions{}, 1, withQueue(4, time.Minute, 0))
	held := qf.hold(t, "held", nil)
	gone := qf.wait(t, "gone", nil)
	stays := qf.wait(t, "stays", nil)
	gone.cancel()
	o := qf.outcome()
	if o.Result != ResultNotAdmitted || o.Queue != QueueClientGone || o.Status != StatusClientClosedRequest || o.Member != "" {
		t.Errorf("outcome %+v, want a not admitted client_gone", o)
	}
	if s := qf.queueStats(); s.Waiting != 1 {
		t.Errorf("%d waiting after the client left, want 1", s.Waiting)
	}
	qf.free <- struct{}{}
	if name := qf.next(t); name != "stays" {
		t.Errorf("%s reached the member next, want stays", name)
	}
	qf.free <- struct{}{}
	for _, s := range []*sent{held, stays} {
		if r := s.reply(t); r.status != http.StatusOK {
			t.Errorf("reply %d %s", r.status, r.body)
		}
	}
	if r := <-gone.done; r.err == nil {
		t.Errorf("the gone client got %d", r.status)
	}
	if got := qf.ups[0].requests.Load(); got != 2 {
		t.Errorf("the member saw %d requests, want 2", got)
	}
	qf.assertIdle("ns/llama")
}

// TestQueueReadyMemberTakesWaiters: a member that turns ready takes the
// waiting requests when the router dispatches after the probe.
func TestQueueReadyMemberTakesWaiters(t *testing.T) {
	qf := newQueueFixture(t, fixtureOptions{}, 2, withQueue(4, time.Minute, 0))
	qf.ready.Set("ns/llama", map[string]bool{"gpu0": true, "gpu1": false})
	held := qf.hold(t, "held", nil)
	w := qf.wait(t, "w", nil)
	qf.ready.Set("ns/llama", map[string]bool{"gpu0": true, "gpu1": true})
	qf.rt.Tiers().Dispatch()
	if name := qf.next(t); name != "w" {
		t.Fatalf("%s reached a member, want w", name)
	}
	if got := qf.ups[1].requests.Load(); got != 1 {
		t.Errorf("gpu1 saw %d requests, want 1", got)
	}
	qf.free <- struct{}{}
	qf.free <- struct{}{}
	for _, s := range []*sent{held, w} {
		if r := s.reply(t); r.status != http.StatusOK {
			t.Errorf("reply %d %s", r.status, r.body)
		}
	}
}

// TestQueueRefusedWhenTierStops: waiting requests get the tier's refusal
// at once when it stops admitting: 503 tier_quiesced when the tier is
// quiesced, 503 router_handed_over when its admission is handed over.
func TestQueueRefusedWhenTierStops(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		stop       func(*queueFixture) error
	}{
		{"quiesced", "tier_quiesced", func(qf *queueFixture) error {
			ts, _ := qf.rt.Tiers().Table().Lookup("ns/llama")
			return ts.Admission().Quiesce(admission.TierScope(), "maintenance")
		}},
		{"handed over", "router_handed_over", func(qf *queueFixture) error {
			ts, _ := qf.rt.Tiers().Table().Lookup("ns/llama")
			_, _, err := ts.Admission().HandOver(make(chan struct{}, 1))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qf := newQueueFixture(t, fixtureOptions{}, 1, withQueue(4, time.Minute, 0))
			held := qf.hold(t, "held", nil)
			w := qf.wait(t, "w", nil)
			if err := tc.stop(qf); err != nil {
				t.Fatal(err)
			}
			r := w.reply(t)
			if r.status != http.StatusServiceUnavailable || apierrortest.Code(t, []byte(r.body)) != tc.code || r.header.Get("Retry-After") != "1" {
				t.Fatalf("%d %s %v, want 503 %s with Retry-After: 1", r.status, r.body, r.header, tc.code)
			}
			if o := qf.outcome(); o.Queue != QueueRefused || o.Code != tc.code {
				t.Errorf("outcome %+v", o)
			}
			qf.free <- struct{}{}
			held.reply(t)
		})
	}
}

// TestNoQueueRefusesAtOnce: without spec.queue a full tier refuses at once
// with 503 capacity_exhausted, the outcome carrying no queue fields.
func TestNoQueueRefusesAtOnce(t *testing.T) {
	qf := newQueueFixture(t, fixtureOptions{}, 1, func(*v1alpha1.ReplicaTierSpec) {})
	held := qf.hold(t, "held", nil)
	resp, body := qf.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusServiceUnavailable || apierrortest.Code(t, body) != "capacity_exhausted" {
		t.Fatalf("%d %s, want 503 capacity_exhausted", resp.StatusCode, body)
	}
	if o := qf.outcome(); o.Queue != "" || o.Queued != 0 {
		t.Errorf("outcome %+v, want no queue fields", o)
	}
	qf.free <- struct{}{}
	held.reply(t)
}

// TestNotSentWaitsInQueue: a request whose member refused the connection
// goes back to admission once without that member, and when the other
// members are full it waits in the queue like any request, then is served.
func TestNotSentWaitsInQueue(t *testing.T) {
	queued, arrived, free := make(chan struct{}, 4), make(chan string, 4), make(chan struct{}, 4)
	f := newFixture(t, fixtureOptions{admission: []admission.Option{admission.WithQueued(func() { queued <- struct{}{} })}})
	gpu1 := newUpstream(t, "gpu1", nil)
	gpu1.handle(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("X-Test-Name")
		<-free
		_, _ = io.WriteString(w, "{}")
	})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 1}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 1}}, withQueue(4, time.Minute, 0)))
	qf := &queueFixture{fixture: f, queued: queued, arrived: arrived, free: free}
	held := qf.hold(t, "held", nil)
	f.ready.Pass("ns/llama", "gpu0") // gpu0 is ready again, and still refuses.
	late := qf.wait(t, "late", nil)
	free <- struct{}{}
	if name := qf.next(t); name != "late" {
		t.Fatalf("%s reached gpu1, want late", name)
	}
	free <- struct{}{}
	for _, s := range []*sent{held, late} {
		if r := s.reply(t); r.status != http.StatusOK {
			t.Fatalf("reply %d %s", r.status, r.body)
		}
	}
	var waited Outcome
	for range 2 {
		if o := f.outcome(); o.Queue != "" {
			waited = o
		}
	}
	if waited.NotSentMember != "gpu0" || waited.Member != "gpu1" || waited.Queue != QueueAdmitted || waited.Result != ResultAdmitted {
		t.Errorf("outcome %+v, want gpu1 after gpu0 refused and a wait in the queue", waited)
	}
	f.assertIdle("ns/llama")
	checkBodiesReleased(t, f)
}

package router

import (
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/status"
)

// TestStatusViewReportsQueue checks what the router's status reporter
// writes for a tier with an admission queue: the bound, the requests
// waiting and the oldest wait read off the router's clock, rounded down to
// whole seconds; and no queue once the tier's configuration has none.
func TestStatusViewReportsQueue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	f := newFixture(t, fixtureOptions{clock: clk, decisionFile: filepath.Join(t.TempDir(), "decisions.jsonl")})
	release := make(chan struct{})
	gpu0 := newUpstream(t, "gpu0", nil)
	gpu0.handle(holdOrAnswer(release))
	queued := make(chan struct{}, 8)
	f.rt.admissionOptions = []admission.Option{admission.WithQueued(func() { queued <- struct{}{} })}
	tier := newTier("ns/q", []string{"q"}, "", []memberSpec{{"gpu0", gpu0.srv.URL, 1}}, withQueue(2, time.Minute, 0))
	tier.Generation = 3
	f.apply(tier)
	view := status.NewRouterView(NewAdmin(f.rt, AdminOptions{}))
	report := func() *v1alpha1.QueueStatus {
		t.Helper()
		got := view.Reports()
		if len(got) != 1 || got[0].Key() != "ns/q" || got[0].AppliedGeneration != 3 {
			t.Fatalf("reports = %+v, want ns/q at generation 3", got)
		}
		return got[0].Queue
	}
	waitQueued := func() {
		t.Helper()
		select {
		case <-queued:
		case <-time.After(failSafe):
			t.Fatal("no request started waiting")
		}
	}

	if got, want := report(), (&v1alpha1.QueueStatus{MaxRequests: 2}); !reflect.DeepEqual(got, want) {
		t.Fatalf("idle queue = %+v, want %+v", got, want)
	}
	held, err := f.post(t.Context(), pathChatCompletions, chat("q"), http.Header{"X-Hold": {"1"}})
	if err != nil || held.StatusCode != http.StatusOK {
		t.Fatalf("held request: %v %v", held, err)
	}
	done := make(chan reply, 2)
	go func() { r, _ := f.mustPost(pathChatCompletions, chat("q"), nil); done <- r }()
	waitQueued()
	clk.Step(1500 * time.Millisecond)
	go func() { r, _ := f.mustPost(pathChatCompletions, chat("q"), nil); done <- r }()
	waitQueued()
	clk.Step(499 * time.Millisecond) // the oldest has waited 1.999 s.
	if got, want := report(), (&v1alpha1.QueueStatus{MaxRequests: 2, Waiting: 2, OldestWaitSeconds: 1}); !reflect.DeepEqual(got, want) {
		t.Fatalf("queue = %+v, want %+v", got, want)
	}
	clk.Step(time.Millisecond)
	if got := report(); got.OldestWaitSeconds != 2 {
		t.Fatalf("queue at 2 s = %+v, want oldestWaitSeconds 2", got)
	}

	close(release)
	_, _ = io.Copy(io.Discard, held.Body)
	_ = held.Body.Close()
	for range 2 {
		if r := <-done; r.StatusCode != http.StatusOK {
			t.Errorf("queued request = %d", r.StatusCode)
		}
	}
	for range 3 {
		f.outcome()
	}
	if got, want := report(), (&v1alpha1.QueueStatus{MaxRequests: 2}); !reflect.DeepEqual(got, want) {
		t.Fatalf("drained queue = %+v, want %+v", got, want)
	}

	// Generation 4 removes the queue: the report has none.
	tier = newTier("ns/q", []string{"q"}, "", []memberSpec{{"gpu0", gpu0.srv.URL, 1}})
	tier.Generation = 4
	f.apply(tier)
	if got := view.Reports(); len(got) != 1 || got[0].AppliedGeneration != 4 || got[0].Queue != nil {
		t.Fatalf("reports without a queue = %+v", got)
	}
}

package router

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminserver"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/status"
)

// TestStatusViewReportsQueue checks what the router's status reporter
// writes for a tier with an admission queue: the bound, the requests
// waiting and the oldest wait read off the router's clock, rounded down to
// whole seconds; and no queue once the tier's configuration has none.
func TestStatusViewReportsQueue(t *testing.T) {
	q := newQueuedFixture(t)
	tier := sourcetest.Tier("ns/q", []string{"q"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: q.gpu0.srv.URL, Max: 1}}, withQueue(2, time.Minute, 0))
	tier.Generation = 3
	q.apply(tier)
	view := status.NewRouterView(adminserver.New(q.rt.Tiers(), adminserver.Options{}))
	report := func() *v1alpha1.QueueStatus {
		t.Helper()
		got := view.Reports()
		if len(got) != 1 || got[0].Key() != "ns/q" || got[0].AppliedGeneration != 3 {
			t.Fatalf("reports = %+v, want ns/q at generation 3", got)
		}
		return got[0].Queue
	}

	if got, want := report(), (&v1alpha1.QueueStatus{MaxRequests: 2}); !reflect.DeepEqual(got, want) {
		t.Fatalf("idle queue = %+v, want %+v", got, want)
	}
	q.hold()
	q.wait(1)
	q.clk.Step(1500 * time.Millisecond)
	q.wait(2)
	q.clk.Step(499 * time.Millisecond) // the oldest has waited 1.999 s.
	if got, want := report(), (&v1alpha1.QueueStatus{MaxRequests: 2, Waiting: 2, OldestWaitSeconds: 1}); !reflect.DeepEqual(got, want) {
		t.Fatalf("queue = %+v, want %+v", got, want)
	}
	q.clk.Step(time.Millisecond)
	if got := report(); got.OldestWaitSeconds != 2 {
		t.Fatalf("queue at 2 s = %+v, want oldestWaitSeconds 2", got)
	}

	q.serve(2)
	if got, want := report(), (&v1alpha1.QueueStatus{MaxRequests: 2}); !reflect.DeepEqual(got, want) {
		t.Fatalf("drained queue = %+v, want %+v", got, want)
	}

	// Generation 4 removes the queue: the report has none.
	tier = sourcetest.Tier("ns/q", []string{"q"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: q.gpu0.srv.URL, Max: 1}})
	tier.Generation = 4
	q.apply(tier)
	if got := view.Reports(); len(got) != 1 || got[0].AppliedGeneration != 4 || got[0].Queue != nil {
		t.Fatalf("reports without a queue = %+v", got)
	}
}

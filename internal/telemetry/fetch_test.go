package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// scriptedCollector returns err after advancing the clock by took.
type scriptedCollector struct {
	clk  *clocktesting.FakePassiveClock
	took time.Duration
	err  error
}

func (c scriptedCollector) Collect(context.Context, pressure.Target) (scheduler.Telemetry, error) {
	c.clk.SetTime(c.clk.Now().Add(c.took))
	return scheduler.Telemetry{}, c.err
}

// TestFetchResults checks the classification of every collection result,
// that the wrapper returns the collector's error unchanged (the cache
// classifies it), and that no error text reaches a label.
func TestFetchResults(t *testing.T) {
	tests := []struct {
		err    error
		took   time.Duration
		cancel bool
		want   string
	}{
		{want: FetchSuccess},
		{took: pressure.FetchTimeout + time.Millisecond, want: FetchTimeout},
		{err: pressure.ErrTimeout, want: FetchTimeout},
		{err: fmt.Errorf("%w: 503", pressure.ErrHTTPStatus), want: FetchHTTPError},
		{err: pressure.ErrTransport, want: FetchTransportError},
		{err: pressure.ErrBodyTooLarge, want: FetchBodyTooLarge},
		{err: fmt.Errorf("%w: line 3", pressure.ErrParse), want: FetchParseError},
		{err: pressure.ErrMissingSeries, want: FetchMissingSeries},
		{err: pressure.ErrTransport, cancel: true, want: FetchCancelled},
		{err: errors.New("dial tcp 127.0.0.1:8001: connection refused"), want: FetchOtherError},
	}
	for _, tt := range tests {
		clk := clocktesting.NewFakePassiveClock(t0)
		f := NewFetchMetrics(clk)
		ctx, cancel := context.WithCancel(context.Background())
		if tt.cancel {
			cancel()
		}
		_, err := f.Wrap(scriptedCollector{clk: clk, took: tt.took, err: tt.err}).Collect(ctx, pressure.Target{MetricsURL: "http://127.0.0.1:8001/metrics", Engine: "vllm"})
		cancel()
		if err != tt.err { //nolint:errorlint // The very same error must come back.
			t.Errorf("%v: wrapper returned %v", tt.err, err)
		}
		if got := testutil.ToFloat64(f.fetches.WithLabelValues(tt.want)); got != 1 {
			t.Errorf("%v: %s = %v, want 1", tt.err, tt.want, got)
		}
		if n := testutil.CollectAndCount(f, namePressureFetches); n != len(pressure.Outcomes) {
			t.Errorf("%d result series, want the %d of the closed set", n, len(pressure.Outcomes))
		}
		out, _ := testutil.CollectAndFormat(f, expfmt.TypeTextPlain, namePressureFetches)
		if strings.Contains(string(out), "127.0.0.1") || strings.Contains(string(out), "dial") {
			t.Errorf("error text leaked: %s", out)
		}
	}
}

// TestFetchAgesBounded checks the completion times kept stay within
// maxTrackedTargets however many targets come and go, forgetting the
// oldest.
func TestFetchAgesBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	f := NewFetchMetrics(clk)
	c := f.Wrap(scriptedCollector{clk: clk, took: time.Millisecond})
	target := func(i int) pressure.Target {
		return pressure.Target{MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", 10000+i), Engine: "vllm"}
	}
	for i := range maxTrackedTargets + 10 {
		_, _ = c.Collect(context.Background(), target(i))
	}
	if n := len(f.completed); n != maxTrackedTargets {
		t.Fatalf("%d completions kept, want %d", n, maxTrackedTargets)
	}
	if _, ok := f.completedAt(target(0)); ok {
		t.Fatal("the oldest target was kept")
	}
	if _, ok := f.completedAt(target(maxTrackedTargets + 9)); !ok {
		t.Fatal("the newest target was forgotten")
	}
}

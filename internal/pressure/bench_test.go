package pressure

import (
	"bytes"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// BenchmarkParseNormalize measures the per-refresh CPU cost of one member:
// parsing a 200-series vLLM exposition (four data-parallel engines, HELP and
// TYPE lines, counters and histograms; 23 KiB) and normalizing the result.
func BenchmarkParseNormalize(b *testing.B) {
	body := readFixture(b, "vllm_200.txt")
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		tel, err := Parse(EngineVLLM, Series{}, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if p := scheduler.Normalize(now, now, true, 32, tel); p.Freshness != scheduler.FreshnessFresh {
			b.Fatalf("pressure = %+v", p)
		}
	}
}

// BenchmarkSnapshot measures the request-path read of a fresh 16-member
// tier: one lock, one clock read, one new map, no I/O. The fake clock stands
// still, so no refresh ever becomes due.
func BenchmarkSnapshot(b *testing.B) {
	clk := clocktesting.NewFakeClock(epoch)
	coll := newFakeCollector()
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}
	published := make(chan string, len(ids))
	c := New(Options{Clock: clk, Collector: coll, Sampled: func(id string) { published <- id }})
	defer c.Close()
	if err := c.Reconfigure([]Tier{tier("t", ids...)}); err != nil {
		b.Fatal(err)
	}
	mustSnapshot(b, c, "t")
	for range ids {
		coll.next(b).answer(telemetry(), nil)
		<-published
	}
	b.ReportAllocs()
	for b.Loop() {
		m, err := c.Snapshot("t")
		if err != nil || m["p"] != freshFive {
			b.Fatal(m, err)
		}
	}
	if n := coll.n.Load(); n != 0 {
		b.Fatalf("%d collections during the benchmark", n)
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// Bounds of TestStreamStacks.
const (
	// stackStreams is how many streams the test holds open at once.
	stackStreams = 100
	// maxStackPerStream bounds the goroutine stacks one open stream adds
	// to the router: its serving goroutine's 8 KiB and the 2 or 4 KiB of
	// net/http's background read of the connection (Go's starting stack
	// size). A stream whose deepest call outgrew 8 KiB keeps a 16 KiB
	// stack for as long as it lasts: 18 KiB and more.
	maxStackPerStream = 14 << 10
)

// TestStreamStacks holds stackStreams streams open through the plain
// router, with API keys and a Capacity tier (the gates and the admission
// a production request takes), and checks the goroutine stacks they add:
// every frame under net/http's write of the response head, the deepest
// call of a stream, must fit in the serving goroutine's 8 KiB
// (docs/ROUTER.md#9-performance).
func TestStreamStacks(t *testing.T) {
	const key = "e2e-stack-key"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	engineArgs := []string{"--max-num-seqs", "256", "--itl-base", "50ms"}
	e0, e1 := startEngine(t, "stacks0", engineArgs...), startEngine(t, "stacks1", engineArgs...)
	tr := tier{name: "stacks", alias: "e2e-stacks", strategy: sluicev1.StrategyCapacity,
		members: []member{{"m0", e0, stackStreams}, {"m1", e1, stackStreams}}}
	r := startRouterBin(t, bins.plainRouter, []string{"--api-keys-file", keys}, tr)

	// One stream first, so that what the router starts once (its member
	// connection pool, the pressure scrape) is not counted.
	s := openChatStreamAs(t, r.baseURL(), key, tr.alias, 4)
	if _, done, err := s.finish(); !done || err != nil {
		t.Fatalf("the first stream did not complete: %v", err)
	}
	r.awaitActive(t, tr.key(), 0)

	stack := func() (stackBytes, goroutines float64) {
		t.Helper()
		var err error
		if stackBytes, err = r.metric("go_memstats_stack_inuse_bytes"); err != nil {
			t.Fatal(err)
		}
		if goroutines, err = r.metric("go_goroutines"); err != nil {
			t.Fatal(err)
		}
		return stackBytes, goroutines
	}
	stack0, g0 := stack()
	streams := make([]*chatStream, stackStreams)
	for i := range streams {
		streams[i] = openChatStreamAs(t, r.baseURL(), key, tr.alias, 1000) // 50 s of tokens, cut below.
	}
	r.awaitActive(t, tr.key(), stackStreams)
	stack1, g1 := stack()
	perStream := (stack1 - stack0) / stackStreams
	t.Logf("%d open streams added %.0f KiB of goroutine stacks (%.1f KiB each) and %.0f goroutines",
		stackStreams, (stack1-stack0)/1024, perStream/1024, g1-g0)
	if perStream > maxStackPerStream {
		t.Errorf("each open stream holds %.1f KiB of goroutine stacks, want at most %d KiB: a frame on the request path outgrew the serving goroutine's 8 KiB",
			perStream/1024, maxStackPerStream>>10)
	}
	for _, s := range streams {
		s.close()
	}
	r.awaitActive(t, tr.key(), 0)
}

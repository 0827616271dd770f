package router

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/sse"
)

// framingStreams is how many random streams TestStreamBytesUnchangedByScanner
// relays.
const framingStreams = 40

// randomStream returns an event stream built from well-framed and broken
// lines with random line endings, and the chunk sizes to write it in.
func randomStream(r *rand.Rand) (string, []int) {
	pieces := []string{
		`data: {"choices":[{"delta":{"content":"x"}}]}`, "data:{}", ": keep-alive", "event: delta", "id: 4",
		"retry: 10", "", "data: [DONE]", "data: nope", "bogus line", "data: " + strings.Repeat("{", 3000),
	}
	ends := []string{"\n", "\r\n", "\r"}
	var b strings.Builder
	for range 1 + r.IntN(20) {
		b.WriteString(pieces[r.IntN(len(pieces))])
		b.WriteString(ends[r.IntN(len(ends))])
	}
	if r.IntN(2) == 0 {
		b.WriteString("data: [DONE]\n\n")
	}
	sizes := make([]int, 1+r.IntN(5))
	for i := range sizes {
		sizes[i] = 1 + r.IntN(64)
	}
	return b.String(), sizes
}

// TestStreamBytesUnchangedByScanner proves the client receives exactly the
// member's bytes of an event stream, whatever its framing and however the
// member chunks it, and that the outcome is the framing's verdict on the
// whole stream.
func TestStreamBytesUnchangedByScanner(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	gpu0 := newUpstream(t, "gpu0", nil)
	var stream string
	var sizes []int
	gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
		sseHeaders(w)
		rest := stream
		for k := 0; rest != ""; k++ {
			n := min(sizes[k%len(sizes)], len(rest))
			writeEvents(w, rest[:n])
			rest = rest[n:]
		}
	})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}}))
	r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a reproducible test input.
	seen := map[End]int{}
	for i := range framingStreams {
		stream, sizes = randomStream(r)
		resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
		if resp.StatusCode != http.StatusOK || string(body) != stream {
			t.Fatalf("stream %d in chunks %v: client got %d %q, want %q", i, sizes, resp.StatusCode, body, stream)
		}
		var s sse.Scanner
		s.Write([]byte(stream))
		want := map[sse.Verdict]End{sse.Complete: EndComplete, sse.Truncated: EndTruncated, sse.Malformed: EndMalformed}[s.End()]
		if o := f.outcome(); o.End != want {
			t.Fatalf("stream %d %q: end %s, want %s", i, stream, o.End, want)
		}
		seen[want]++
	}
	if len(seen) != 3 {
		t.Errorf("verdicts %v, want streams of all three", seen)
	}
	f.assertIdle("ns/llama")
}

// TestEnginesimStreamFaults relays enginesim's --truncate-sse and
// --malformed-sse streams. A truncated stream ends without its terminating
// chunk: truncated, the client's response aborted after the engine's
// bytes. enginesim's malformed frame is invalid JSON inside a well-framed
// data line ("data: {" starts it): the framing check does not parse JSON,
// so the stream is complete.
func TestEnginesimStreamFaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*enginesim.Config)
		wantEnd   End
		wantAbort bool
	}{
		{"truncate-sse", func(c *enginesim.Config) { c.TruncateSSE = true }, EndTruncated, true},
		{"malformed-sse", func(c *enginesim.Config) { c.MalformedSSE = true }, EndComplete, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := enginesim.DefaultConfig()
			cfg.Model = "served/model"
			cfg.OutputTokens = 6
			cfg.TTFTBase, cfg.TTFTPerSeq, cfg.ITLBase, cfg.ITLPerSeq = 0, 0, 0, 0
			tc.mutate(&cfg)
			sim, err := enginesim.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			engine := httptest.NewServer(sim)
			t.Cleanup(engine.Close)
			f := newFixture(t, fixtureOptions{})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: engine.URL, Max: 2}}))
			body := `{"model":"llama","stream":true,"messages":[{"role":"user","content":"hello"}]}`
			resp, err := f.post(context.Background(), pathChatCompletions, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || (err != nil) != tc.wantAbort || !strings.HasPrefix(string(got), "data: {") {
				t.Fatalf("got %d %q, %v; want a stream, aborted %v", resp.StatusCode, got, err, tc.wantAbort)
			}
			if o := f.outcome(); o.End != tc.wantEnd {
				t.Fatalf("end %s, want %s", o.End, tc.wantEnd)
			}
			f.assertIdle("ns/llama")
		})
	}
}

// TestEventsLargerThanTheCopyBuffer relays events several copy buffers
// long, each written and flushed at once by the member: the client gets
// every byte and the scanner, which sees each event in pieces, finds the
// stream complete.
func TestEventsLargerThanTheCopyBuffer(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	gpu0 := newUpstream(t, "gpu0", nil)
	event := "data: {\"pad\":\"" + strings.Repeat("x", 3*copyBufferSize+7) + "\"}\n\n"
	stream := event + event + "data: [DONE]\n\n"
	gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
		sseHeaders(w)
		writeEvents(w, event, event, "data: [DONE]\n\n")
	})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}}))
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusOK || string(body) != stream {
		t.Fatalf("client got %d and %d bytes, want 200 and the member's %d", resp.StatusCode, len(body), len(stream))
	}
	if o := f.outcome(); o.End != EndComplete {
		t.Fatalf("end %s, want %s", o.End, EndComplete)
	}
	f.assertIdle("ns/llama")
}

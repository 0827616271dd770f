package router

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/sse"
)

// intervalLog records the intervals the router reports, per tier and
// member.
type intervalLog struct {
	mu   sync.Mutex
	asks []string
	got  []float64
}

func (l *intervalLog) Intervals(tier, member string) Observer {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asks = append(l.asks, tier+"#"+member)
	return l
}

func (l *intervalLog) Observe(s float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

func (l *intervalLog) intervals() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// The events of a scripted chat stream: a role-only first chunk, content
// in three events (the last two written at once), then the usage chunk.
const (
	roleEvent  = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	helEvent   = `data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n"
	loEvents   = `data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"content":"!"}}]}` + "\n\n"
	usageEvent = `data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}` + "\n\n" + "data: [DONE]\n\n"
)

// scriptedStream is an upstream that sends one part of its stream each
// time next is signalled, then returns; the first part goes at once.
func scriptedStream(next <-chan struct{}, parts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for i, part := range parts {
			if i > 0 {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
			writeEvents(w, part)
		}
	}
}

// readPart reads len(want) bytes of the client's stream and checks them.
func readPart(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// TestContentTiming proves, on a fake clock, that a stream's time to
// first token is the read of its first content event (the role-only first
// chunk is none), that each later content event reports its interval (0
// for one read with the one before it), that the usage chunk's counts are
// recorded, and that the client gets the member's bytes unchanged, with
// and without an interval recorder.
func TestContentTiming(t *testing.T) {
	for _, withIntervals := range []bool{true, false} {
		t.Run(map[bool]string{true: "intervals", false: "no intervals"}[withIntervals], func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			log := &intervalLog{}
			opts := fixtureOptions{clock: clk}
			if withIntervals {
				opts.intervals = log
			}
			f := newFixture(t, opts)
			gpu0 := newUpstream(t, "gpu0", nil)
			next := make(chan struct{})
			gpu0.handle(scriptedStream(next, roleEvent, helEvent, loEvents, usageEvent))
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}}))

			resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			br := bufio.NewReader(resp.Body)
			readPart(t, br, roleEvent)
			for _, step := range []struct {
				advance time.Duration
				part    string
			}{
				{100 * time.Millisecond, helEvent},
				{30 * time.Millisecond, loEvents},
				{10 * time.Millisecond, usageEvent},
			} {
				clk.Step(step.advance)
				next <- struct{}{}
				readPart(t, br, step.part) // the router read it: its time is taken.
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after the stream: %q, %v", rest, err)
			}
			o := f.outcome()
			if o.End != EndComplete || o.FirstToken != 100*time.Millisecond || o.Duration != 140*time.Millisecond {
				t.Fatalf("outcome end %s, first token %v, duration %v; want complete, 100ms, 140ms", o.End, o.FirstToken, o.Duration)
			}
			if !o.HasUsage || o.Usage != (sse.Usage{Prompt: 12, Completion: 3}) {
				t.Fatalf("usage %+v (%t), want 12 prompt and 3 completion tokens", o.Usage, o.HasUsage)
			}
			if !withIntervals {
				if len(log.intervals()) != 0 || len(log.asks) != 0 {
					t.Fatal("intervals recorded without a recorder")
				}
				return
			}
			if got := log.intervals(); !slices.Equal(got, []float64{0.03, 0}) {
				t.Fatalf("intervals %v, want [0.03 0]", got)
			}
			if !slices.Equal(log.asks, []string{"ns/llama#gpu0"}) {
				t.Fatalf("asked for %v, want ns/llama#gpu0 once", log.asks)
			}
		})
	}
}

// TestContentTimingEnds proves the time to first token of a non-streaming
// body (its end), of a stream the client cut and of one the engine cut,
// and that an embeddings answer and a non-2xx answer have none.
func TestContentTimingEnds(t *testing.T) {
	const body = `{"choices":[{"message":{"role":"assistant","content":"Hello"}}],"usage":{"prompt_tokens":9,"completion_tokens":1}}`
	for _, tc := range []struct {
		name      string
		path      string
		upstream  func(clk *clocktesting.FakeClock) http.HandlerFunc
		run       func(t *testing.T, f *fixture)
		wantEnd   End
		wantFirst time.Duration
		wantUsage bool
	}{
		{
			name: "non-streaming body", path: pathChatCompletions,
			upstream: func(clk *clocktesting.FakeClock) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					clk.Step(250 * time.Millisecond) // the generation.
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, body)
				}
			},
			wantEnd: EndComplete, wantFirst: 250 * time.Millisecond, wantUsage: true,
		},
		{
			name: "non-2xx body", path: pathChatCompletions,
			upstream: func(*clocktesting.FakeClock) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, body)
				}
			},
			wantEnd: EndComplete,
		},
		{
			name: "embeddings", path: pathEmbeddings,
			upstream: func(*clocktesting.FakeClock) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":2}}`)
				}
			},
			wantEnd: EndComplete,
		},
		{
			name: "stream cut by the client", path: pathChatCompletions,
			upstream: func(clk *clocktesting.FakeClock) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					sseHeaders(w)
					clk.Step(40 * time.Millisecond)
					writeEvents(w, roleEvent, helEvent)
					<-r.Context().Done()
				}
			},
			run: func(t *testing.T, f *fixture) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				resp, err := f.post(ctx, pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				readPart(t, bufio.NewReader(resp.Body), roleEvent+helEvent)
				cancel()
			},
			wantEnd: EndClientGone, wantFirst: 40 * time.Millisecond,
		},
		{
			name: "stream cut by the engine", path: pathChatCompletions,
			upstream: func(clk *clocktesting.FakeClock) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					sseHeaders(w)
					clk.Step(70 * time.Millisecond)
					writeEvents(w, helEvent)
					resetConnection(w)
				}
			},
			run: func(t *testing.T, f *fixture) {
				resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				if got, err := io.ReadAll(resp.Body); err == nil || !strings.HasPrefix(helEvent, string(got)) {
					t.Fatalf("got %q, %v; want a prefix of the event, then an abort", got, err)
				}
			},
			wantEnd: EndUpstreamError, wantFirst: 70 * time.Millisecond,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			f := newFixture(t, fixtureOptions{clock: clk, intervals: &intervalLog{}})
			gpu0 := newUpstream(t, "gpu0", nil)
			gpu0.handle(tc.upstream(clk))
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}}))
			if tc.run != nil {
				tc.run(t, f)
			} else {
				body := chat("llama")
				if tc.path == pathEmbeddings {
					body = `{"model":"llama","input":"hi"}`
				}
				if resp, _ := f.mustPost(tc.path, body, nil); resp.StatusCode == 0 {
					t.Fatal("no answer")
				}
			}
			o := f.outcome()
			if o.End != tc.wantEnd || o.FirstToken != tc.wantFirst || o.HasUsage != tc.wantUsage {
				t.Fatalf("end %s, first token %v, usage %t; want %s, %v, %t", o.End, o.FirstToken, o.HasUsage, tc.wantEnd, tc.wantFirst, tc.wantUsage)
			}
			if tc.wantUsage && o.Usage != (sse.Usage{Prompt: 9, Completion: 1}) {
				t.Fatalf("usage %+v", o.Usage)
			}
		})
	}
}

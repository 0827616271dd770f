package enginesim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestModels(t *testing.T) {
	h := newHarness(t, nil)
	r := h.must(http.MethodGet, "/v1/models", "")
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	m := decodeJSON(t, r.body)
	if path(m, "object") != "list" || path(m, "data", 0, "id") != "sim/model-1" ||
		path(m, "data", 0, "object") != "model" || path(m, "data", 1) != nil {
		t.Fatalf("models body = %s", r.body)
	}
	if r := h.must(http.MethodGet, "/health", ""); r.status != http.StatusOK {
		t.Fatalf("health status %d", r.status)
	}
	if r := h.must(http.MethodPost, "/v1/models", ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST /v1/models status %d, want 405", r.status)
	}
}

func TestAliases(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Aliases = []string{"chat", "llama-70b"} })
	m := decodeJSON(t, h.must(http.MethodGet, "/v1/models", "").body)
	for i, want := range []string{"sim/model-1", "chat", "llama-70b"} {
		if path(m, "data", i, "id") != want || path(m, "data", i, "root") != "sim/model-1" {
			t.Fatalf("models[%d] = %v, want id %s rooted at the model", i, path(m, "data", i), want)
		}
	}
	r := h.must(http.MethodPost, "/v1/chat/completions", `{"model":"llama-70b","max_tokens":1}`)
	if r.status != http.StatusOK || path(decodeJSON(t, r.body), "model") != "sim/model-1" {
		t.Fatalf("alias request: status %d body %s", r.status, r.body)
	}
	if r := h.must(http.MethodPost, "/v1/chat/completions", `{"model":"llama","max_tokens":1}`); r.status != http.StatusNotFound {
		t.Fatalf("unknown name: status %d", r.status)
	}
}

func TestNonStreamingBodies(t *testing.T) {
	// Prompt estimate: raw JSON length of messages/prompt/input over 4.
	const messages = `[{"role":"user","content":"hello"}]` // 35 bytes -> 9 tokens
	for _, tc := range []struct {
		desc, path, body string
		wantTokens       int
		wantFinish       string
		text             func(map[string]any) any
		usage            func(map[string]any) (prompt, completion, total any)
	}{
		{
			desc: "chat default", path: "/v1/chat/completions",
			body:       `{"model":"sim/model-1","messages":` + messages + `}`,
			wantTokens: DefaultOutputTokens, wantFinish: "stop",
		},
		{
			desc: "chat max_tokens", path: "/v1/chat/completions",
			body:       `{"messages":` + messages + `,"max_tokens":3,"temperature":0.5,"tools":[{"x":[1,{"y":null}]}]}`,
			wantTokens: 3, wantFinish: "length",
		},
		{
			desc: "chat max_completion_tokens wins", path: "/v1/chat/completions",
			body:       `{"messages":` + messages + `,"max_tokens":3,"max_completion_tokens":5}`,
			wantTokens: 5, wantFinish: "length",
		},
		{
			desc: "completions", path: "/v1/completions",
			body:       `{"model":"sim/model-1","prompt":` + messages + `,"max_tokens":4,"stream":false}`,
			wantTokens: 4, wantFinish: "length",
		},
		{
			desc: "responses", path: "/v1/responses",
			body:       `{"model":"sim/model-1","input":` + messages + `,"max_output_tokens":6}`,
			wantTokens: 6,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := newHarness(t, nil)
			r := h.must(http.MethodPost, tc.path, tc.body)
			if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d type %q body %s", r.status, r.header.Get("Content-Type"), r.body)
			}
			if r.header.Get(HeaderMaxInFlight) != "1" {
				t.Fatalf("%s = %q, want 1", HeaderMaxInFlight, r.header.Get(HeaderMaxInFlight))
			}
			m := decodeJSON(t, r.body)
			wantText := string(appendText(nil, tc.wantTokens))
			var text, prompt, completion, total any
			switch tc.path {
			case "/v1/chat/completions":
				text = path(m, "choices", 0, "message", "content")
				prompt, completion, total = path(m, "usage", "prompt_tokens"), path(m, "usage", "completion_tokens"), path(m, "usage", "total_tokens")
				if path(m, "object") != "chat.completion" || path(m, "choices", 0, "finish_reason") != tc.wantFinish {
					t.Errorf("object/finish_reason wrong: %s", r.body)
				}
			case "/v1/completions":
				text = path(m, "choices", 0, "text")
				prompt, completion, total = path(m, "usage", "prompt_tokens"), path(m, "usage", "completion_tokens"), path(m, "usage", "total_tokens")
				if path(m, "object") != "text_completion" || path(m, "choices", 0, "finish_reason") != tc.wantFinish {
					t.Errorf("object/finish_reason wrong: %s", r.body)
				}
			default:
				text = path(m, "output", 0, "content", 0, "text")
				prompt, completion, total = path(m, "usage", "input_tokens"), path(m, "usage", "output_tokens"), path(m, "usage", "total_tokens")
				if path(m, "object") != "response" || path(m, "status") != "completed" {
					t.Errorf("object/status wrong: %s", r.body)
				}
			}
			if text != wantText {
				t.Errorf("text = %q, want %q", text, wantText)
			}
			if prompt != 9.0 || completion != float64(tc.wantTokens) || total != float64(9+tc.wantTokens) {
				t.Errorf("usage = %v/%v/%v, want 9/%d/%d", prompt, completion, total, tc.wantTokens, 9+tc.wantTokens)
			}
			if path(m, "model") != "sim/model-1" {
				t.Errorf("model = %v", path(m, "model"))
			}
			st := h.e.State()
			if st.Running != 0 || st.InFlight != 0 || st.KVTokens != 0 || st.TotalRequests != 1 {
				t.Errorf("state after request = %+v", st)
			}
		})
	}
}

// TestModelNotFoundShape pins the unknown-model answer to vLLM's: a
// router that forwards an alias the engine does not serve gets exactly
// this, so a regression of the router's model rewrite shows as this 404.
func TestModelNotFoundShape(t *testing.T) {
	h := newHarness(t, nil)
	r := h.must(http.MethodPost, "/v1/chat/completions", `{"model":"qwen","messages":[]}`)
	const want = "{\"error\":{\"message\":\"The model `qwen` does not exist.\",\"type\":\"NotFoundError\",\"param\":\"model\",\"code\":404}}"
	if r.status != http.StatusNotFound || string(r.body) != want || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s %q, want 404 application/json %s", r.status, r.header.Get("Content-Type"), r.body, want)
	}
}

func TestRequestErrors(t *testing.T) {
	big := `{"prompt":"` + strings.Repeat("x", MaxRequestBytes) + `"}`
	for _, tc := range []struct {
		desc, path, body string
		status           int
		code             string
	}{
		{"wrong model chat", "/v1/chat/completions", `{"model":"other","messages":[]}`, http.StatusNotFound, "404"},
		{"wrong model completions", "/v1/completions", `{"model":"other","prompt":"x"}`, http.StatusNotFound, "404"},
		{"wrong model responses", "/v1/responses", `{"model":"other","input":"x","stream":true}`, http.StatusNotFound, "404"},
		{"wrong model embeddings", "/v1/embeddings", `{"model":"other","input":"x"}`, http.StatusNotFound, "404"},
		{"prefix model", "/v1/chat/completions", `{"model":"sim/model","messages":[]}`, http.StatusNotFound, "404"},
		{"invalid JSON", "/v1/chat/completions", `{"model":`, http.StatusBadRequest, "invalid_json"},
		{"not an object", "/v1/chat/completions", `[1]`, http.StatusBadRequest, "invalid_json"},
		{"empty body", "/v1/completions", ``, http.StatusBadRequest, "invalid_json"},
		{"model not a string", "/v1/chat/completions", `{"model":5}`, http.StatusBadRequest, "invalid_json"},
		{"max_tokens negative", "/v1/chat/completions", `{"max_tokens":-1}`, http.StatusBadRequest, "invalid_json"},
		{"max_tokens fractional", "/v1/chat/completions", `{"max_tokens":1.5}`, http.StatusBadRequest, "invalid_json"},
		{"max_tokens zero", "/v1/chat/completions", `{"max_tokens":0}`, http.StatusBadRequest, "invalid_value"},
		{"max_tokens too large", "/v1/completions", `{"max_tokens":65537}`, http.StatusBadRequest, "invalid_value"},
		{"embeddings without input", "/v1/embeddings", `{"model":"sim/model-1"}`, http.StatusBadRequest, "invalid_value"},
		{"body too large", "/v1/completions", big, http.StatusRequestEntityTooLarge, "request_too_large"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := newHarness(t, nil)
			r := h.must(http.MethodPost, tc.path, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			m := decodeJSON(t, r.body)
			code := path(m, "error", "code")
			if f, ok := code.(float64); ok { // vLLM's unknown-model error carries the status as a number.
				code = strconv.FormatFloat(f, 'f', -1, 64)
			}
			if code != tc.code || path(m, "error", "message") == "" || path(m, "error", "type") == nil {
				t.Fatalf("error body %s, want code %s", r.body, tc.code)
			}
			if r.header.Get(HeaderMaxInFlight) != "1" {
				t.Fatalf("%s = %q", HeaderMaxInFlight, r.header.Get(HeaderMaxInFlight))
			}
			if st := h.e.State(); st.Running != 0 || st.InFlight != 0 || st.Waiting != 0 {
				t.Fatalf("state = %+v", st)
			}
		})
	}
}

// chatStreamText checks a chat or completions SSE body and returns the
// concatenated text, the finish reason and the usage chunk (nil if none).
func chatStreamText(t *testing.T, body []byte, object string) (text, finish string, usage map[string]any) {
	t.Helper()
	frames := parseSSE(t, body)
	if last := frames[len(frames)-1]; last.data != "[DONE]" || last.event != "" {
		t.Fatalf("last frame = %+v, want data: [DONE]", last)
	}
	var sb strings.Builder
	for i, f := range frames[:len(frames)-1] {
		m := decodeJSON(t, []byte(f.data))
		if path(m, "object") != object || path(m, "id") != path(decodeJSON(t, []byte(frames[0].data)), "id") {
			t.Fatalf("frame %d has object %v or a different id: %s", i, path(m, "object"), f.data)
		}
		if u, ok := path(m, "usage").(map[string]any); ok {
			if usage != nil || len(path(m, "choices").([]any)) != 0 {
				t.Fatalf("unexpected usage chunk: %s", f.data)
			}
			usage = u
			continue
		}
		if usage != nil {
			t.Fatalf("chunk after the usage chunk: %s", f.data)
		}
		if s, ok := path(m, "choices", 0, "delta", "content").(string); ok {
			sb.WriteString(s)
		}
		if s, ok := path(m, "choices", 0, "text").(string); ok {
			sb.WriteString(s)
		}
		if s, ok := path(m, "choices", 0, "finish_reason").(string); ok {
			if finish != "" {
				t.Fatalf("two finish reasons")
			}
			finish = s
		}
	}
	return sb.String(), finish, usage
}

func TestChatAndCompletionsStreams(t *testing.T) {
	for _, tc := range []struct {
		desc, path, body, object string
		tokens                   int
		usage                    bool
	}{
		{"chat", "/v1/chat/completions", `{"messages":"12345678","stream":true,"max_tokens":5}`, "chat.completion.chunk", 5, false},
		{"chat with usage", "/v1/chat/completions", `{"messages":"12345678","stream":true,"stream_options":{"include_usage":true}}`, "chat.completion.chunk", DefaultOutputTokens, true},
		{"chat one token", "/v1/chat/completions", `{"messages":"12345678","stream":true,"max_completion_tokens":1}`, "chat.completion.chunk", 1, false},
		{"completions", "/v1/completions", `{"prompt":"12345678","stream":true,"max_tokens":4}`, "text_completion", 4, false},
		{"completions with usage", "/v1/completions", `{"prompt":"12345678","stream":true,"max_tokens":4,"stream_options":{"include_usage":true}}`, "text_completion", 4, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := newHarness(t, nil)
			r := h.must(http.MethodPost, tc.path, tc.body)
			if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d type %q", r.status, r.header.Get("Content-Type"))
			}
			text, finish, usage := chatStreamText(t, r.body, tc.object)
			if want := string(appendText(nil, tc.tokens)); text != want {
				t.Errorf("text = %q, want %q", text, want)
			}
			if want := map[bool]string{true: "stop", false: "length"}[tc.tokens == DefaultOutputTokens]; finish != want {
				t.Errorf("finish = %q, want %q", finish, want)
			}
			if tc.usage != (usage != nil) {
				t.Fatalf("usage chunk = %v, want present %v", usage, tc.usage)
			}
			if usage != nil && (usage["prompt_tokens"] != 3.0 || usage["completion_tokens"] != float64(tc.tokens)) {
				t.Errorf("usage = %v", usage)
			}
		})
	}
}

// responsesEvents is the event sequence of a Responses stream of n tokens.
func responsesEvents(n int) []string {
	events := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	for range n {
		events = append(events, "response.output_text.delta")
	}
	return append(events, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
}

func TestResponsesStream(t *testing.T) {
	h := newHarness(t, nil)
	r := h.must(http.MethodPost, "/v1/responses", `{"model":"sim/model-1","input":"hello there","stream":true,"max_output_tokens":3}`)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %q", r.status, r.header.Get("Content-Type"))
	}
	frames := parseSSE(t, r.body)
	want := responsesEvents(3)
	if len(frames) != len(want) {
		t.Fatalf("%d frames, want %d", len(frames), len(want))
	}
	var deltas strings.Builder
	for i, f := range frames {
		m := decodeJSON(t, []byte(f.data))
		if f.event != want[i] || path(m, "type") != want[i] || path(m, "sequence_number") != float64(i) {
			t.Fatalf("frame %d = event %q type %v seq %v, want %q seq %d", i, f.event, path(m, "type"), path(m, "sequence_number"), want[i], i)
		}
		if d, ok := path(m, "delta").(string); ok {
			deltas.WriteString(d)
		}
	}
	wantText := string(appendText(nil, 3))
	if deltas.String() != wantText {
		t.Fatalf("deltas = %q, want %q", deltas.String(), wantText)
	}
	done := decodeJSON(t, []byte(frames[len(frames)-1].data))
	if path(done, "response", "status") != "completed" ||
		path(done, "response", "output", 0, "content", 0, "text") != wantText ||
		path(done, "response", "usage", "input_tokens") != 4.0 ||
		path(done, "response", "usage", "output_tokens") != 3.0 ||
		path(done, "response", "usage", "total_tokens") != 7.0 {
		t.Fatalf("response.completed = %s", frames[len(frames)-1].data)
	}
	if strings.Contains(string(r.body), "[DONE]") {
		t.Fatal("a Responses stream must not end with [DONE]")
	}
}

func TestEmbeddings(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.EmbeddingDim = 8 })
	vectors := func(body string) [][]float64 {
		t.Helper()
		r := h.must(http.MethodPost, "/v1/embeddings", body)
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var resp struct {
			Data []struct {
				Index     int       `json:"index"`
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(r.body, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Usage.PromptTokens < 1 {
			t.Fatalf("usage = %+v", resp.Usage)
		}
		var out [][]float64
		for i, d := range resp.Data {
			if d.Index != i || len(d.Embedding) != 8 {
				t.Fatalf("item %d: index %d dim %d", i, d.Index, len(d.Embedding))
			}
			var norm float64
			for _, v := range d.Embedding {
				norm += v * v
			}
			if math.Abs(norm-1) > 1e-6 {
				t.Fatalf("vector %d is not unit length: %v", i, norm)
			}
			out = append(out, d.Embedding)
		}
		return out
	}
	one := vectors(`{"input":"alpha"}`)
	many := vectors(`{"model":"sim/model-1","input":["alpha","beta"]}`)
	tokens := vectors(`{"input":[1,2,3]}`)
	if len(one) != 1 || len(many) != 2 || len(tokens) != 1 {
		t.Fatalf("vector counts %d %d %d, want 1 2 1", len(one), len(many), len(tokens))
	}
	if !equalVectors(one[0], many[0]) || equalVectors(many[0], many[1]) {
		t.Fatal("vectors are not a deterministic function of the input")
	}
	if st := h.e.State(); st.Requests(EndpointEmbeddings) != 3 || st.Running != 0 {
		t.Fatalf("state = %+v", st)
	}
}

func equalVectors(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMalformedSSE(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":"x","stream":true,"max_tokens":6}`},
		{"/v1/completions", `{"prompt":"x","stream":true,"max_tokens":6}`},
		{"/v1/responses", `{"input":"x","stream":true,"max_output_tokens":6}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MalformedSSE = true })
			r := h.must(http.MethodPost, tc.path, tc.body)
			frames := parseSSE(t, r.body)
			invalid, at := 0, -1
			for i, f := range frames {
				if f.data != "[DONE]" && !json.Valid([]byte(f.data)) {
					invalid++
					at = i
				}
			}
			if invalid != 1 {
				t.Fatalf("%d invalid frames, want 1", invalid)
			}
			if at == 0 || at == len(frames)-1 {
				t.Fatalf("the malformed frame is at %d of %d, want mid-stream", at, len(frames))
			}
			last := frames[len(frames)-1]
			if tc.path == "/v1/responses" {
				if last.event != "response.completed" {
					t.Fatalf("last event %q, want the stream to continue to response.completed", last.event)
				}
			} else if last.data != "[DONE]" {
				t.Fatalf("last frame %+v, want the stream to continue to [DONE]", last)
			}
		})
	}
}

func TestTruncateSSE(t *testing.T) {
	for _, tc := range []struct{ path, body, terminal string }{
		{"/v1/chat/completions", `{"messages":"x","stream":true,"max_tokens":6}`, "[DONE]"},
		{"/v1/completions", `{"prompt":"x","stream":true,"max_tokens":6}`, "[DONE]"},
		{"/v1/responses", `{"input":"x","stream":true,"max_output_tokens":6}`, "response.completed"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.TruncateSSE = true })
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			r := h.do(ctx, http.MethodPost, tc.path, tc.body)
			// The headers arrived; the body ends with an error instead of
			// the chunked terminator.
			if r.status != http.StatusOK {
				t.Fatalf("status %d (%v)", r.status, r.err)
			}
			if !errors.Is(r.err, io.ErrUnexpectedEOF) {
				t.Fatalf("truncated stream read error = %v, want io.ErrUnexpectedEOF", r.err)
			}
			if strings.Contains(string(r.body), tc.terminal) {
				t.Fatalf("truncated stream contains its terminal %q", tc.terminal)
			}
			if !strings.Contains(string(r.body), `"The`) {
				t.Fatalf("truncated stream has no token before the cut: %q", r.body)
			}
			h.await("engine idle", func(s State) bool { return s.Running == 0 && s.InFlight == 0 && s.KVTokens == 0 })
		})
	}
}

func TestErrorRateIsDeterministic(t *testing.T) {
	const n = 64
	run := func(rate float64, seed uint64) string {
		h := newHarness(t, func(c *Config) {
			c.ErrorRate = rate
			c.Seed = seed
		})
		var sb strings.Builder
		for range n {
			r := h.must(http.MethodPost, "/v1/chat/completions", `{"messages":"x","max_tokens":1}`)
			switch r.status {
			case http.StatusOK:
				sb.WriteByte('.')
			case http.StatusInternalServerError:
				if path(decodeJSON(t, r.body), "error", "type") != "server_error" {
					t.Fatalf("500 body = %s", r.body)
				}
				sb.WriteByte('E')
			default:
				t.Fatalf("status %d", r.status)
			}
		}
		if st := h.e.State(); st.Running != 0 || st.InFlight != 0 {
			t.Fatalf("state = %+v", st)
		}
		return sb.String()
	}
	a, b, c := run(0.5, 7), run(0.5, 7), run(0.5, 8)
	if a != b {
		t.Fatalf("same seed, different outcomes:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same outcomes: %s", a)
	}
	errs := strings.Count(a, "E")
	if errs < n/4 || errs > 3*n/4 {
		t.Fatalf("%d errors of %d at rate 0.5: %s", errs, n, a)
	}
	if all := run(1, 1); strings.Contains(all, ".") {
		t.Fatalf("rate 1 let a request through: %s", all)
	}
	if none := run(0, 1); strings.Contains(none, "E") {
		t.Fatalf("rate 0 injected an error: %s", none)
	}
}

func TestStallBeforeHeaders(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Stall = Stall{Duration: 3 * time.Second} })
	ch := h.async(context.Background(), http.MethodPost, "/v1/chat/completions", `{"messages":"x","max_tokens":2}`)
	h.await("stalled", func(s State) bool { return s.ClockWaits == 1 && s.InFlight == 1 })
	if st := h.e.State(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("a request stalled before headers holds a slot: %+v", st)
	}
	h.fc.Step(3*time.Second - 1)
	if h.fc.Waiters() != 1 {
		t.Fatal("stall ended early")
	}
	h.fc.Step(1)
	if r := receive(t, ch); r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
}

func TestStallForeverUntilClientLeaves(t *testing.T) {
	for _, at := range []StallPoint{StallBeforeHeaders, StallAfterFirstChunk} {
		t.Run(string(at), func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Stall = Stall{Forever: true}
				c.StallAt = at
			})
			ctx, cancel := context.WithCancel(context.Background())
			ch := h.async(ctx, http.MethodPost, "/v1/chat/completions", `{"messages":"x","max_tokens":2}`)
			h.await("stalled", func(s State) bool { return s.ClockWaits == 1 })
			cancel()
			if r := receive(t, ch); r.err == nil {
				t.Fatalf("a request stalled forever completed with status %d", r.status)
			}
			h.await("handler gone", func(s State) bool { return s.InFlight == 0 && s.ClockWaits == 0 && s.Running == 0 })
		})
	}
}

func TestStallAfterFirstChunk(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Stall = Stall{Duration: 5 * time.Second}
		c.StallAt = StallAfterFirstChunk
	})
	t.Run("stream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), failsafe)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"messages":"x","stream":true,"max_tokens":3}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		// Role chunk and first token arrive before the stall.
		for _, want := range []string{`"role":"assistant"`, `"content":"The"`} {
			line, err := br.ReadString('\n')
			if err != nil || !strings.Contains(line, want) {
				t.Fatalf("line %q (%v), want it to contain %s", line, err, want)
			}
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		h.await("stalled", func(s State) bool { return s.ClockWaits == 1 && s.Running == 1 })
		h.fc.Step(5 * time.Second)
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		frames := parseSSE(t, rest)
		var text strings.Builder
		for _, f := range frames[:len(frames)-1] {
			if c, ok := path(decodeJSON(t, []byte(f.data)), "choices", 0, "delta", "content").(string); ok {
				text.WriteString(c)
			}
		}
		if text.String() != " quick brown" || frames[len(frames)-1].data != "[DONE]" {
			t.Fatalf("rest of the stream = %q", rest)
		}
	})
	t.Run("non-streaming", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), failsafe)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.ts.URL+"/v1/completions",
			strings.NewReader(`{"prompt":"x","max_tokens":3}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.ts.Client().Do(req) // headers arrive before the stall
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		h.await("stalled", func(s State) bool { return s.ClockWaits == 1 && s.Running == 0 })
		h.fc.Step(5 * time.Second)
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if path(decodeJSON(t, body), "choices", 0, "text") != "The quick brown" {
			t.Fatalf("body = %s", body)
		}
	})
}

func TestMaxInFlightIsExact(t *testing.T) {
	const clients, slots = 12, 4
	h := newHarness(t, func(c *Config) {
		c.MaxNumSeqs = slots
		c.TTFTBase = time.Second
	})
	ctx := context.Background()
	start := make(chan struct{})
	results := make(chan result, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			<-start
			path := "/v1/chat/completions"
			if i%2 == 1 {
				path = "/v1/completions"
			}
			results <- h.do(ctx, http.MethodPost, path, `{"prompt":"x","max_tokens":2}`)
		})
	}
	close(start)
	h.await("every request in a handler", func(s State) bool {
		return s.InFlight == clients && s.Running == slots && s.Waiting == clients-slots && s.ClockWaits == slots
	})
	for done := 0; done < clients; done += slots {
		h.fc.Step(time.Second)
		if done+slots < clients {
			h.await("next batch prefilling", func(s State) bool {
				return s.InFlight == clients-done-slots && s.Running == slots && s.ClockWaits == slots
			})
		}
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("request failed: %d %v", r.status, r.err)
		}
		if r.header.Get(HeaderMaxInFlight) != strconv.Itoa(clients) {
			t.Fatalf("%s = %q, want %d", HeaderMaxInFlight, r.header.Get(HeaderMaxInFlight), clients)
		}
	}
	st := decodeJSON(t, h.must(http.MethodGet, "/debug/stats", "").body)
	if st["max_in_flight"] != float64(clients) || st["max_running"] != float64(slots) ||
		st["in_flight"] != 0.0 || st["total_requests"] != float64(clients) ||
		path(st, "requests", "chat_completions") != float64(clients/2) ||
		path(st, "requests", "completions") != float64(clients/2) {
		t.Fatalf("stats = %v", st)
	}

	if r := h.must(http.MethodPost, "/debug/reset", ""); r.status != http.StatusNoContent {
		t.Fatalf("reset status %d", r.status)
	}
	st = decodeJSON(t, h.must(http.MethodGet, "/debug/stats", "").body)
	if st["max_in_flight"] != 0.0 || st["max_running"] != 0.0 || st["total_requests"] != 0.0 {
		t.Fatalf("stats after reset = %v", st)
	}
	// The stats request itself is not counted; the next request is.
	ch := h.async(ctx, http.MethodPost, "/v1/chat/completions", `{"max_tokens":1}`)
	h.await("prefilling", func(s State) bool { return s.ClockWaits == 1 })
	h.fc.Step(time.Second)
	if r := receive(t, ch); r.header.Get(HeaderMaxInFlight) != "1" {
		t.Fatalf("after reset %s = %q, want 1", HeaderMaxInFlight, r.header.Get(HeaderMaxInFlight))
	}
}

func TestClientGoneReleasesSlot(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxNumSeqs = 1
		c.TTFTBase = time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	running := h.async(ctx, http.MethodPost, "/v1/chat/completions", `{"stream":true,"max_tokens":2}`)
	h.await("prefilling", func(s State) bool { return s.Running == 1 && s.ClockWaits == 1 })
	queued := h.async(ctx, http.MethodPost, "/v1/completions", `{"max_tokens":2}`)
	h.await("queued", func(s State) bool { return s.Waiting == 1 })
	cancel()
	receive(t, running)
	receive(t, queued)
	h.await("idle", func(s State) bool {
		return s.Running == 0 && s.Waiting == 0 && s.InFlight == 0 && s.ClockWaits == 0 && s.KVTokens == 0
	})
}

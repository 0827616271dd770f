package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// chatStream is a streaming chat completion read by hand, so a test can
// hold it open at a known point.
type chatStream struct {
	resp   *http.Response
	r      *bufio.Reader
	tokens int
	cancel context.CancelFunc
}

// openChatStream sends a streaming chat request for maxTokens tokens to
// baseURL and reads it up to its first token.
func openChatStream(t *testing.T, baseURL, model string, maxTokens int) *chatStream {
	t.Helper()
	return openChatStreamAs(t, baseURL, "", model, maxTokens)
}

// openChatStreamAs is openChatStream presenting the API key key (none when
// empty).
func openChatStreamAs(t *testing.T, baseURL, key, model string, maxTokens int) *chatStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"tell a long story"}],"max_tokens":%d,"stream":true}`, model, maxTokens)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/chat/completions", bytes.NewBufferString(body))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := streamClient.Do(req) //nolint:bodyclose // closed by chatStream.close, registered with t.Cleanup.
	if err != nil {
		cancel()
		t.Fatalf("open stream: %v", err)
	}
	s := &chatStream{resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		t.Fatalf("open stream: status %d: %s", resp.StatusCode, b)
	}
	for s.tokens == 0 {
		done, err := s.next()
		if err != nil || done {
			t.Fatalf("stream ended before its first token (done %v): %v", done, err)
		}
	}
	return s
}

// streamClient has its own connections, so the streams of a test do not
// share keep-alive connections with its admin calls.
var streamClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}

// next reads one SSE line; it reports done at [DONE] and counts tokens.
func (s *chatStream) next() (done bool, err error) {
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		return false, err
	}
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
	if !ok {
		return false, nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		return true, nil
	}
	var chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &chunk); err != nil {
		return false, fmt.Errorf("malformed chunk %q: %w", data, err)
	}
	if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
		s.tokens++
	}
	return false, nil
}

// finish reads the rest of the stream. It returns the tokens received in
// total, whether [DONE] arrived, and the read error that ended it (nil
// after [DONE] and a clean end of the body).
func (s *chatStream) finish() (tokens int, done bool, err error) {
	for {
		d, err := s.next()
		switch {
		case d:
			_, err = io.Copy(io.Discard, s.r)
			return s.tokens, true, err
		case errors.Is(err, io.EOF):
			return s.tokens, false, nil
		case err != nil:
			return s.tokens, false, err
		}
	}
}

// close ends the request; it is idempotent.
func (s *chatStream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// TestStreamOutcomesRecorded streams through the router from three engines,
// a normal one, one started with --truncate-sse and one with
// --malformed-sse, and reads the router's decision records: the cut
// stream's client connection is aborted after the engine's bytes and its
// record says truncated; the normal stream and the malformed-JSON one (its
// bad frame is a well-framed data line, and the router does not parse
// JSON) are complete.
func TestStreamOutcomesRecorded(t *testing.T) {
	good, cut, bad := startEngine(t, "good"), startEngine(t, "cut", "--truncate-sse"), startEngine(t, "bad", "--malformed-sse")
	tiers := []tier{
		{name: "good", alias: "e2e-good", members: []member{{"m0", good, 4}}},
		{name: "cut", alias: "e2e-cut", members: []member{{"m0", cut, 4}}},
		{name: "bad", alias: "e2e-bad", members: []member{{"m0", bad, 4}}},
	}
	r := startRouter(t, tiers...)
	for _, tc := range []struct {
		tier      tier
		wantAbort bool
		wantEnd   string
	}{
		{tiers[0], false, "complete"},
		{tiers[1], true, "truncated"},
		{tiers[2], false, "complete"},
	} {
		id := "e2e-outcome-" + tc.tier.name
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`, tc.tier.alias)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.baseURL()+"/chat/completions", bytes.NewBufferString(body))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", id)
		resp, err := streamClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", tc.tier.name, err)
		}
		got, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		_ = resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusOK || (err != nil) != tc.wantAbort || !bytes.HasPrefix(got, []byte("data: {")) {
			t.Fatalf("%s: status %d, %q, read error %v; want a stream, aborted %v", tc.tier.name, resp.StatusCode, got, err, tc.wantAbort)
		}
		var rec struct {
			Tier     string `json:"tier"`
			Attempts []struct {
				StreamOutcome string `json:"stream_outcome"`
			} `json:"attempts"`
		}
		eventually(t, "the decision record of "+id, func() (bool, string) {
			if err := getJSON("http://"+r.admin+"/admin/v1/decisions/"+id, &rec); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
		if rec.Tier != tc.tier.key() || len(rec.Attempts) != 1 || rec.Attempts[0].StreamOutcome != tc.wantEnd {
			t.Fatalf("%s: record %+v, want one attempt with stream_outcome %s", tc.tier.name, rec, tc.wantEnd)
		}
		r.awaitActive(t, tc.tier.key(), 0)
	}
}

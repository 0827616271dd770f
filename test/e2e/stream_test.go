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
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"tell a long story"}],"max_tokens":%d,"stream":true}`, model, maxTokens)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/chat/completions", bytes.NewBufferString(body))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
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

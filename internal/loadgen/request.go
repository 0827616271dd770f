package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// requestBody renders the JSON body every request of a run sends.
func requestBody(c *Config) ([]byte, error) {
	body := map[string]any{"model": c.Model}
	switch c.API {
	case Completions:
		body["prompt"] = c.Prompt
	case Responses:
		body["input"] = c.Prompt
	default:
		body["messages"] = []map[string]string{{"role": "user", "content": c.Prompt}}
	}
	if !c.NoStream {
		body["stream"] = true
		if c.IncludeUsage && c.API != Responses {
			body["stream_options"] = map[string]bool{"include_usage": true}
		}
	}
	if c.MaxTokens > 0 {
		if c.API == Responses {
			body["max_output_tokens"] = c.MaxTokens
		} else {
			body["max_tokens"] = c.MaxTokens
		}
	}
	return json.Marshal(body)
}

// newDefaultClient returns the client used when Config.Client is nil:
// HTTP/1.1 keep-alive with an idle pool sized for the concurrency, no proxy,
// no compression (SSE must arrive as sent), and no timeout of its own.
func newDefaultClient(concurrency int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: max(concurrency, idleConnsPerHost),
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// requester sends one request of a run and measures it.
type requester struct {
	client *http.Client
	clock  clock.Clock
	url    string
	body   []byte
	header http.Header
	api    API
	stream bool
	count  string
	tmo    time.Duration
}

// newRequester prepares the parts of a request every send shares.
func newRequester(c *Config, client *http.Client) (*requester, error) {
	body, err := requestBody(c)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for k, vs := range c.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	h.Set("Content-Type", "application/json")
	if c.NoStream {
		h.Set("Accept", "application/json")
	} else {
		h.Set("Accept", "text/event-stream")
	}
	if c.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
	return &requester{
		client: client,
		clock:  c.Clock,
		url:    strings.TrimSuffix(c.BaseURL, "/") + c.API.path(),
		body:   body,
		header: h,
		api:    c.API,
		stream: !c.NoStream,
		count:  c.CountHeader,
		tmo:    c.RequestTimeout,
	}, nil
}

// do sends one request and measures it. runCtx is the run's context: a
// request it cancels counts as ErrorCanceled.
func (q *requester) do(runCtx context.Context) requestResult {
	ctx := runCtx
	if q.tmo > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(runCtx, q.tmo)
		defer cancel()
	}
	res := requestResult{ttft: -1}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.url, bytes.NewReader(q.body))
	if err != nil {
		res.failure = ErrorTransport
		return res
	}
	req.Header = q.header.Clone()
	start := q.clock.Now()
	resp, err := q.client.Do(req)
	if err != nil {
		res.failure = q.classify(runCtx, ctx, ErrorTransport)
		return res
	}
	defer func() { _ = resp.Body.Close() }()
	res.status = resp.StatusCode
	if q.count != "" {
		res.header = resp.Header.Get(q.count)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
		res.failure = ErrorStatus
		return res
	}
	if q.stream {
		q.readStream(runCtx, ctx, resp.Body, start, &res)
	} else {
		q.readBody(runCtx, ctx, resp.Body, start, &res)
	}
	return res
}

// classify maps a failure to ErrorCanceled or ErrorTimeout when a context
// caused it, else to kind.
func (q *requester) classify(runCtx, ctx context.Context, kind ErrorKind) ErrorKind {
	switch {
	case runCtx.Err() != nil:
		return ErrorCanceled
	case ctx.Err() != nil:
		return ErrorTimeout
	default:
		return kind
	}
}

// usage is the part of a body or event carrying the output token count.
type usage struct {
	CompletionTokens int `json:"completion_tokens"`
	OutputTokens     int `json:"output_tokens"`
}

// readBody reads a non-streaming body: success when it is a JSON object.
func (q *requester) readBody(runCtx, ctx context.Context, body io.Reader, start time.Time, res *requestResult) {
	b, err := io.ReadAll(io.LimitReader(body, maxBodyBytes))
	end := q.clock.Now()
	if err != nil {
		res.failure = q.classify(runCtx, ctx, ErrorStream)
		return
	}
	var v struct {
		Usage *usage `json:"usage"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		res.failure = ErrorMalformed
		return
	}
	if v.Usage != nil {
		res.tokens = v.Usage.CompletionTokens + v.Usage.OutputTokens
	}
	res.e2e = end.Sub(start)
}

// streamEvent is the part of a chat, completions or Responses event that
// says whether it carries a token or ends the stream.
type streamEvent struct {
	Type    string `json:"type"`
	Delta   string `json:"delta"`
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

// Responses stream event types the generator acts on.
const (
	eventTextDelta = "response.output_text.delta"
	eventCompleted = "response.completed"
	eventFailed    = "response.failed"
	eventError     = "error"
)

// readStream reads an SSE body event by event, stamping each token as it
// arrives. The clock is read once at the start (by do), once per token and
// once at the end of the stream.
func (q *requester) readStream(runCtx, ctx context.Context, body io.Reader, start time.Time, res *requestResult) {
	r := bufio.NewReaderSize(body, 4096)
	var last time.Time
	done := false
	for !done {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				res.failure = ErrorStream // ended without its terminal event
			} else {
				res.failure = q.classify(runCtx, ctx, ErrorStream)
			}
			return
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // event names, comments, blank separators
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if q.api != Responses && bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		var ev streamEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			res.failure = ErrorMalformed
			return
		}
		token := false
		switch q.api {
		case Responses:
			switch ev.Type {
			case eventTextDelta:
				token = ev.Delta != ""
			case eventCompleted:
				done = true
			case eventFailed, eventError:
				res.failure = ErrorStream
				return
			}
		default:
			for _, c := range ev.Choices {
				if c.Delta.Content != "" || c.Text != "" {
					token = true
				}
			}
		}
		if !token {
			continue
		}
		now := q.clock.Now()
		if res.tokens == 0 {
			res.ttft = now.Sub(start)
		} else {
			res.itl = append(res.itl, now.Sub(last))
		}
		last = now
		res.tokens++
	}
	// Read to the end of the body (the chunked terminator follows the
	// terminal event) so that the connection is reused; what follows the
	// terminal event does not change the outcome.
	_, _ = io.Copy(io.Discard, io.LimitReader(r, maxEventBytes))
	res.e2e = q.clock.Now().Sub(start)
}

// errLineTooLong reports an SSE line above maxEventBytes.
var errLineTooLong = errors.New("loadgen: SSE line too long")

// readLine returns the next line without its line ending. A final line
// without a newline is returned with a nil error; the call after it returns
// io.EOF.
func readLine(r *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case err == nil:
			if long != nil {
				chunk = append(long, chunk...)
			}
			return bytes.TrimRight(chunk, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(long)+len(chunk) > maxEventBytes {
				return nil, errLineTooLong
			}
			long = append(long, chunk...)
		case errors.Is(err, io.EOF) && len(long)+len(chunk) > 0:
			return bytes.TrimRight(append(long, chunk...), "\r"), nil
		default:
			return nil, err
		}
	}
}

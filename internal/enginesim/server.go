package enginesim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/utils/clock"
)

// HeaderMaxInFlight is the response header of every inference response that
// carries the engine's MaxInFlight at the time the header was written.
const HeaderMaxInFlight = "X-Enginesim-Max-Inflight"

// Buffer bounds.
const (
	// MaxRequestBytes bounds an inference request body, like the router's
	// default --max-body-bytes; a larger body gets 413.
	MaxRequestBytes = 16 << 20
	// initialBufferBytes is the capacity of a pooled buffer: enough for a
	// small request and its non-streaming response.
	initialBufferBytes = 4 << 10
	// maxPooledBufferBytes keeps buffers grown by a huge request or an
	// oversized exposition out of the pool.
	maxPooledBufferBytes = 64 << 10
)

// Canonical header values, shared so that setting them allocates nothing.
// net/http never modifies them.
var (
	jsonContentType    = []string{"application/json"}
	sseContentType     = []string{"text/event-stream"}
	metricsContentVals = []string{metricsContentType}
	noCache            = []string{"no-cache"}
)

// errBodyTooLarge is returned by readBody for a body over its limit.
var errBodyTooLarge = errors.New("request body too large")

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock behind every simulated duration. The default is
// clock.RealClock{}.
func WithClock(clk clock.Clock) Option {
	return func(s *Server) { s.clock = clk }
}

// WithLogger sets the structured logger. The default discards everything.
// Requests are logged at debug level with their endpoint, status and token
// counts, never their content.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) { s.log = l }
}

// Server is the simulator's http.Handler: the OpenAI-compatible API, the
// metrics and the debug endpoints in front of one Engine.
type Server struct {
	cfg           Config
	engine        *Engine
	clock         clock.Clock
	log           *slog.Logger
	mux           *http.ServeMux
	modelJSON     []byte
	modelsBody    []byte
	metricsLabels string
	ids           atomic.Uint64
	errorSeq      atomic.Uint64
	errorSeed     uint64
	bufs          sync.Pool
	reqLog        *requestLog // nil without WithRequestLog.
}

// NewServer validates cfg and returns a Server with an idle Engine.
func NewServer(cfg Config, opts ...Option) (*Server, error) {
	s := &Server{
		cfg:   cfg,
		clock: clock.RealClock{},
		log:   slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(s)
	}
	e, err := newEngine(cfg, s.clock)
	if err != nil {
		return nil, err
	}
	s.engine = e
	modelJSON, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, err
	}
	s.modelJSON = modelJSON
	s.modelsBody, err = modelsBody(cfg, s.clock.Now().Unix())
	if err != nil {
		return nil, err
	}
	s.metricsLabels = metricsLabels(cfg.Flavor, cfg.Model)
	s.errorSeed = splitmix64(cfg.Seed)
	s.bufs.New = func() any {
		b := make([]byte, 0, initialBufferBytes)
		return &b
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		s.generate(w, r, EndpointChatCompletions)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		s.generate(w, r, EndpointCompletions)
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		s.generate(w, r, EndpointResponses)
	})
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("GET /debug/stats", s.handleStats)
	mux.HandleFunc("POST /debug/reset", s.handleReset)
	s.mux = mux
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Engine returns the engine behind the server.
func (s *Server) Engine() *Engine { return s.engine }

// modelsBody renders the GET /v1/models response: the model, then its
// aliases, each rooted at the model.
func modelsBody(cfg Config, created int64) ([]byte, error) {
	type model struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen int     `json:"max_model_len"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, id := range append([]string{cfg.Model}, cfg.Aliases...) {
		list.Data = append(list.Data, model{
			ID: id, Object: "model", Created: created, OwnedBy: "enginesim",
			Root: cfg.Model, MaxModelLen: cfg.KVCapacityTokens,
		})
	}
	return json.Marshal(list)
}

func (s *Server) getBuf() *[]byte { return s.bufs.Get().(*[]byte) }

func (s *Server) putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBufferBytes {
		return
	}
	*bp = (*bp)[:0]
	s.bufs.Put(bp)
}

// readBody appends r to b, failing with errBodyTooLarge beyond limit bytes.
func readBody(r io.Reader, b []byte, limit int) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return b, errBodyTooLarge
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// isObject reports whether b's first non-space byte opens a JSON object.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

// setMaxHeader sets HeaderMaxInFlight.
func (s *Server) setMaxHeader(h http.Header) {
	h[HeaderMaxInFlight] = []string{strconv.Itoa(s.engine.maxInFlightNow())}
}

// injectError decides, in arrival order and reproducibly for a seed, whether
// the next valid inference request gets an injected 500.
func (s *Server) injectError() bool {
	if s.cfg.ErrorRate <= 0 {
		return false
	}
	x := splitmix64(s.errorSeed + s.errorSeq.Add(1))
	return float64(x>>11)/(1<<53) < s.cfg.ErrorRate
}

// stall pauses for the configured stall, or until ctx ends for a stall
// forever.
func (s *Server) stall(ctx context.Context) error {
	if s.cfg.Stall.Forever {
		return s.engine.sleepUntilDone(ctx)
	}
	return s.engine.sleep(ctx, s.cfg.Stall.Duration)
}

// stallAt reports whether the configured stall happens at p.
func (s *Server) stallAt(p StallPoint) bool {
	return s.cfg.Stall.Enabled() && s.cfg.StallAt == p
}

// readRequest reads the body into bp and decodes it into v. On failure it
// writes the error response and returns false.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, bp *[]byte, v any) bool {
	body, err := readBody(r.Body, (*bp)[:0], MaxRequestBytes)
	*bp = body[:0]
	s.setMaxHeader(w.Header())
	switch {
	case errors.Is(err, errBodyTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "",
			"The request body is too large.")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_body", "",
			"The request body could not be read.")
		return false
	}
	if !isObject(body) || json.Unmarshal(body, v) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "",
			"The request body must be a JSON object with valid OpenAI fields.")
		return false
	}
	return true
}

// checkModel writes vLLM's 404 and returns false when model is neither the
// served model nor one of its aliases. An absent model means the served one.
func (s *Server) checkModel(w http.ResponseWriter, model string) bool {
	if model == "" || model == s.cfg.Model || slices.Contains(s.cfg.Aliases, model) {
		return true
	}
	writeModelNotFound(w, model)
	return false
}

// preflight applies the injected error and the before-headers stall. It
// returns false when the request is over.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request, ep Endpoint) bool {
	if s.injectError() {
		writeError(w, http.StatusInternalServerError, "server_error", "internal_error", "",
			"enginesim: injected internal error.")
		s.logRequest(r.Context(), ep, http.StatusInternalServerError, nil)
		return false
	}
	if s.stallAt(StallBeforeHeaders) {
		if err := s.stall(r.Context()); err != nil {
			return false
		}
	}
	return true
}

// generate serves chat completions, completions and responses.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, ep Endpoint) {
	// rst resets a connection taken over by FaultResetMidBody. Deferred
	// first, it runs last: the engine no longer counts the request when the
	// peer sees the reset.
	var rst resetter
	defer rst.close()
	e := s.engine
	e.begin(ep)
	defer e.end(ep)
	if s.reqLog != nil {
		defer s.reqLog.arrive(r, ep, s.clock.Now().UnixNano())()
	}
	bp := s.getBuf()
	defer s.putBuf(bp)

	var req request
	if !s.readRequest(w, r, bp, &req) || !s.checkModel(w, req.Model) {
		return
	}
	fault, ok := s.requestFault(w, r)
	if !ok {
		return
	}
	n, limited, ok := req.outputTokens(s.cfg.OutputTokens)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "max_tokens",
			"The output token limit must be between 1 and "+strconv.Itoa(MaxOutputTokensLimit)+".")
		return
	}
	g := generation{
		id:         s.ids.Add(1),
		created:    s.clock.Now().Unix(),
		prompt:     req.promptTokens(),
		completion: n,
		finish:     "stop",
	}
	if limited {
		g.finish = "length"
	}
	if !s.preflight(w, r, ep) {
		return
	}
	switch fault {
	case FaultStallHeaders:
		_ = e.sleepUntilDone(r.Context())
		return
	case FaultEndlessHeader, FaultInformationalFlood:
		if !floodHead(w, fault) {
			panic(http.ErrAbortHandler)
		}
		return
	}
	maxOutput := 0
	if limited {
		maxOutput = n
	}
	f := faulted{fault: fault, rst: &rst}
	if req.Stream {
		s.stream(r.Context(), w, ep, &g, req.StreamOptions.IncludeUsage, maxOutput, bp, f)
		return
	}
	s.complete(r.Context(), w, ep, &g, maxOutput, bp, f)
}

// faulted is a generation's per-request fault and the resetter that
// FaultResetMidBody takes its connection over with.
type faulted struct {
	fault Fault
	rst   *resetter
}

// requestFault returns the request's FaultHeader fault when the header is
// allowed. An invalid value gets 400 invalid_fault and false; without
// Config.AllowFaultHeader the header is ignored.
func (s *Server) requestFault(w http.ResponseWriter, r *http.Request) (Fault, bool) {
	if !s.cfg.AllowFaultHeader {
		return FaultNone, true
	}
	f, err := parseFault(r.Header)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_fault", "",
			"The X-Enginesim-Fault header must name one of reset-mid-body, truncate-sse, stall, stall-headers, endless-header, informational-flood.")
		return FaultNone, false
	}
	return f, true
}

// flushHeaders writes a 200 with the JSON content type and flushes it.
func flushHeaders(w http.ResponseWriter, contentType []string) {
	w.Header()["Content-Type"] = contentType
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// complete serves a non-streaming generation.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, ep Endpoint, g *generation, maxOutput int, bp *[]byte, f faulted) {
	headersSent := false
	if f.fault == FaultStall {
		s.setMaxHeader(w.Header())
		flushHeaders(w, jsonContentType)
		_ = s.engine.sleepUntilDone(ctx)
		return
	}
	if s.stallAt(StallAfterFirstChunk) {
		s.setMaxHeader(w.Header())
		flushHeaders(w, jsonContentType)
		headersSent = true
		if err := s.stall(ctx); err != nil {
			return
		}
	}
	seq, err := s.engine.admit(ctx, g.prompt)
	if err != nil {
		return
	}
	defer seq.release()
	if err := seq.prefill(ctx, true); err != nil {
		return
	}
	if err := seq.decode(ctx, g.completion-1); err != nil {
		return
	}
	seq.release()

	b := (*bp)[:0]
	switch ep {
	case EndpointChatCompletions:
		b = appendChatCompletion(b, g, s.modelJSON)
	case EndpointCompletions:
		b = appendCompletion(b, g, s.modelJSON)
	default:
		b = appendResponseObject(b, g, s.modelJSON, true, maxOutput)
	}
	*bp = b
	if f.fault == FaultResetMidBody || f.fault == FaultTruncateSSE {
		// The whole body's length is announced; half of it is sent.
		s.writeHead(w, headersSent, len(b))
		_, _ = w.Write(b[:len(b)/2])
		f.rst.abortMidBody(w, f.fault)
		return
	}
	s.writeBody(w, headersSent, b)
	s.logRequest(ctx, ep, http.StatusOK, g)
}

// writeBody writes a 200 JSON body, with its headers unless already sent.
func (s *Server) writeBody(w http.ResponseWriter, headersSent bool, b []byte) {
	s.writeHead(w, headersSent, len(b))
	_, _ = w.Write(b)
}

// writeHead writes the 200 JSON headers of a body of n bytes unless they
// were already sent.
func (s *Server) writeHead(w http.ResponseWriter, headersSent bool, n int) {
	if headersSent {
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(n)}
	s.setMaxHeader(h)
	w.WriteHeader(http.StatusOK)
}

// handleEmbeddings serves POST /v1/embeddings: one deterministic unit vector
// per input, after one prefill delay in a slot.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	e := s.engine
	e.begin(EndpointEmbeddings)
	defer e.end(EndpointEmbeddings)
	if s.reqLog != nil {
		defer s.reqLog.arrive(r, EndpointEmbeddings, s.clock.Now().UnixNano())()
	}
	bp := s.getBuf()
	defer s.putBuf(bp)

	var req embeddingRequest
	if !s.readRequest(w, r, bp, &req) || !s.checkModel(w, req.Model) {
		return
	}
	inputs, err := embeddingInputs(req.Input)
	if err != nil || len(req.Input) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "input",
			"The input must be a string, an array of strings or an array of token arrays.")
		return
	}
	prompt := max(1, (len(req.Input)+charsPerToken-1)/charsPerToken)
	if !s.preflight(w, r, EndpointEmbeddings) {
		return
	}
	ctx := r.Context()
	headersSent := false
	if s.stallAt(StallAfterFirstChunk) {
		s.setMaxHeader(w.Header())
		flushHeaders(w, jsonContentType)
		headersSent = true
		if err := s.stall(ctx); err != nil {
			return
		}
	}
	seq, err := e.admit(ctx, prompt)
	if err != nil {
		return
	}
	defer seq.release()
	if err := seq.prefill(ctx, false); err != nil {
		return
	}
	seq.release()

	b := append((*bp)[:0], `{"object":"list","data":[`...)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = appendInt(b, int64(i))
		b = append(b, `,"embedding":`...)
		b = appendEmbedding(b, in, s.cfg.EmbeddingDim)
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = append(b, s.modelJSON...)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = appendInt(b, int64(prompt))
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, int64(prompt))
	b = append(b, `}}`...)
	*bp = b
	s.writeBody(w, headersSent, b)
	s.logRequest(ctx, EndpointEmbeddings, http.StatusOK, &generation{prompt: prompt})
}

// handleModels serves GET /v1/models with the one served model.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	s.engine.begin(EndpointModels)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(s.modelsBody))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.modelsBody)
}

// handleHealth serves GET /health: 200 with an empty body, like vLLM.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	s.engine.begin(EndpointHealth)
	w.WriteHeader(http.StatusOK)
}

// handleMetrics serves GET /metrics in the configured flavor, applying the
// metrics faults: the delay first, then the failure, then the padding.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.engine.begin(EndpointMetrics)
	if err := s.engine.sleep(r.Context(), s.cfg.MetricsDelay); err != nil {
		return
	}
	if s.cfg.MetricsFail {
		http.Error(w, "enginesim: injected metrics failure", http.StatusInternalServerError)
		return
	}
	snap := s.engine.metrics()
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := appendMetrics((*bp)[:0], s.cfg.Flavor, s.metricsLabels, &snap)
	if s.cfg.MetricsOversize {
		b = appendPadding(b)
	}
	*bp = b
	h := w.Header()
	h["Content-Type"] = metricsContentVals
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// Stats is the JSON body of GET /debug/stats.
type Stats struct {
	// InFlight is the number of inference requests inside a handler now.
	InFlight int `json:"in_flight"`
	// MaxInFlight is the highest InFlight since start or reset.
	MaxInFlight int `json:"max_in_flight"`
	// Running is the number of request sequences holding a slot, hidden
	// load excluded.
	Running int `json:"running"`
	// MaxRunning is the highest Running since start or reset.
	MaxRunning int `json:"max_running"`
	// HiddenRunning is the number of slots held by hidden load.
	HiddenRunning int `json:"hidden_running"`
	// Waiting is the number of requests queued for a slot.
	Waiting int `json:"waiting"`
	// KVTokens is the tokens in flight, hidden load included.
	KVTokens int64 `json:"kv_tokens"`
	// KVUsage is KVTokens over the KV capacity, capped at 1.
	KVUsage float64 `json:"kv_usage"`
	// TotalRequests counts inference requests since start or reset.
	TotalRequests uint64 `json:"total_requests"`
	// Requests counts requests per endpoint name since start or reset.
	Requests map[string]uint64 `json:"requests"`
}

// StatsOf converts a State to the /debug/stats body.
func StatsOf(st State) Stats {
	out := Stats{
		InFlight:      st.InFlight,
		MaxInFlight:   st.MaxInFlight,
		Running:       st.Running,
		MaxRunning:    st.MaxRunning,
		HiddenRunning: st.HiddenRunning,
		Waiting:       st.Waiting,
		KVTokens:      st.KVTokens,
		KVUsage:       st.KVUsage(),
		TotalRequests: st.TotalRequests,
		Requests:      make(map[string]uint64, numEndpoints),
	}
	for ep := range Endpoint(numEndpoints) {
		out.Requests[ep.String()] = st.Requests(ep)
	}
	return out
}

// handleStats serves GET /debug/stats.
func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	b, err := json.Marshal(StatsOf(s.engine.State()))
	if err != nil {
		http.Error(w, "enginesim: stats encoding failed", http.StatusInternalServerError)
		return
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// handleReset serves POST /debug/reset: see Engine.Reset.
func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.engine.Reset()
	w.WriteHeader(http.StatusNoContent)
}

// logRequest logs one finished request at debug level, without content.
func (s *Server) logRequest(ctx context.Context, ep Endpoint, status int, g *generation) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("endpoint", ep.String()), slog.Int("status", status)}
	if g != nil {
		attrs = append(attrs, slog.Int("prompt_tokens", g.prompt), slog.Int("completion_tokens", g.completion))
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "request", attrs...)
}

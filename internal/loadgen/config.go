package loadgen

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"k8s.io/utils/clock"
)

// Mode selects how requests are scheduled.
type Mode string

// The scheduling modes.
const (
	// ClosedLoop runs Concurrency workers; each sends its next request as
	// soon as its previous one ended, so the offered load adapts to the
	// latency of the system under test.
	ClosedLoop Mode = "closed"
	// OpenLoop sends requests at Poisson arrival times with a mean of Rate
	// per second, whether or not earlier requests finished, the way
	// independent users arrive. At most Concurrency requests are in flight;
	// an arrival that finds that many is dropped and counted.
	OpenLoop Mode = "open"
)

// API selects the OpenAI endpoint requests are sent to.
type API string

// The supported endpoints.
const (
	// ChatCompletions sends POST {BaseURL}/chat/completions with one user
	// message; tokens are the chunks with non-empty delta content.
	ChatCompletions API = "chat"
	// Completions sends POST {BaseURL}/completions with a prompt; tokens are
	// the chunks with non-empty text.
	Completions API = "completions"
	// Responses sends POST {BaseURL}/responses with an input; tokens are the
	// response.output_text.delta events.
	Responses API = "responses"
)

// path returns the endpoint's path below the API root.
func (a API) path() string {
	switch a {
	case Completions:
		return "/completions"
	case Responses:
		return "/responses"
	default:
		return "/chat/completions"
	}
}

// Defaults and bounds.
const (
	// DefaultPrompt is the prompt sent when Config.Prompt is empty.
	DefaultPrompt = "Write one sentence about load balancing."
	// DefaultMaxInFlight bounds the requests in flight in open loop when
	// Config.Concurrency is zero. It is far above what one host's replicas
	// serve at once, so it only stops an overloaded target from exhausting
	// the generator's sockets and memory.
	DefaultMaxInFlight = 1024
	// MaxConcurrency bounds Config.Concurrency: each in-flight request holds
	// a goroutine and a connection (a file descriptor), so a larger value
	// is a typo rather than a load one generator process can offer.
	MaxConcurrency = 100_000
	// MaxRate bounds Config.Rate (arrivals per second); far above what a
	// single generator process can pace.
	MaxRate = 1e6
	// MaxTokensLimit bounds Config.MaxTokens; it is enginesim's limit and
	// the largest output a common long-context model allows.
	MaxTokensLimit = 65536
	// MaxSamples bounds the samples each Distribution keeps (8 MiB of
	// durations). Beyond it a seeded reservoir keeps a uniform sample, so
	// quantiles stay unbiased while Count, Min, Max and Mean stay exact.
	MaxSamples = 1 << 20
	// maxEventBytes bounds one SSE line; an OpenAI chunk is a few hundred
	// bytes, a Responses completion event holds the whole output text.
	maxEventBytes = 4 << 20
	// maxBodyBytes bounds a non-streaming or error body read by the
	// generator; the rest is discarded unread and the connection closed.
	maxBodyBytes = 64 << 20
	// idleConnsPerHost is the default transport's idle connection pool per
	// host when Concurrency is larger; a pool as large as the concurrency
	// keeps closed-loop workers on their keep-alive connections.
	idleConnsPerHost = 64
)

// Config is one load run. The zero value is not valid: BaseURL, Model, a
// schedule (Concurrency or Rate) and a limit (Requests or Duration) are
// required.
type Config struct {
	// BaseURL is the OpenAI API root, such as http://127.0.0.1:8080/v1; the
	// endpoint's path is appended. Required, http or https.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// Header holds further request headers; nil sends none.
	Header http.Header
	// Model is the request's model field. Required.
	Model string
	// API is the endpoint; the zero value means ChatCompletions.
	API API
	// NoStream sends non-streaming requests; then only end-to-end latency
	// is measured (TTFT and ITL stay empty) and Tokens counts the usage's
	// output tokens. The zero value streams.
	NoStream bool
	// IncludeUsage asks a chat or completions stream for its usage chunk
	// (stream_options.include_usage). Responses streams always carry usage.
	IncludeUsage bool
	// Prompt is the user message, prompt or input; empty means
	// DefaultPrompt.
	Prompt string
	// MaxTokens limits each request's output (max_tokens, or
	// max_output_tokens for Responses), 1..MaxTokensLimit; zero sends no
	// limit, so the target's default applies.
	MaxTokens int
	// Mode is the schedule; the zero value means ClosedLoop.
	Mode Mode
	// Concurrency is the number of workers in closed loop (required, at
	// least 1) and the bound on requests in flight in open loop (zero means
	// DefaultMaxInFlight). At most MaxConcurrency.
	Concurrency int
	// Rate is the mean number of arrivals per second in open loop, above 0
	// and at most MaxRate. It must be zero in closed loop.
	Rate float64
	// Seed makes open-loop arrival times reproducible and seeds the sample
	// reservoir: the same seed gives the same schedule.
	Seed uint64
	// Duration stops issuing requests this long after the run started;
	// requests in flight then finish. Zero means no time limit.
	Duration time.Duration
	// Requests stops after this many requests were issued (open-loop drops
	// included). Zero means no count limit. At least one of Duration and
	// Requests must be set.
	Requests int
	// RequestTimeout bounds each request from send to the end of its body;
	// zero means none (the run's context still applies).
	RequestTimeout time.Duration
	// CountHeader names a response header whose values Result.HeaderCounts
	// counts per response (any status), such as "X-Sluice-Member". Empty
	// counts nothing.
	CountHeader string
	// Client sends the requests; nil means a client of this package: HTTP/1.1
	// keep-alive, no proxy, no compression, no timeout of its own. A caller's
	// client must not retry or follow redirects for the counts to be exact.
	Client *http.Client
	// Clock times every measurement and paces the open loop; nil means
	// clock.RealClock{}.
	Clock clock.Clock
}

// Validate reports the first field outside its documented bounds, wrapped
// in ErrInvalidConfig.
func (c *Config) Validate() error {
	invalid := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return invalid("BaseURL", "must be an absolute http(s) URL")
	case c.Model == "":
		return invalid("Model", "is required")
	case c.API != "" && c.API != ChatCompletions && c.API != Completions && c.API != Responses:
		return invalid("API", "must be %q, %q or %q", ChatCompletions, Completions, Responses)
	case c.MaxTokens < 0 || c.MaxTokens > MaxTokensLimit:
		return invalid("MaxTokens", "must be 0..%d", MaxTokensLimit)
	case c.Concurrency < 0 || c.Concurrency > MaxConcurrency:
		return invalid("Concurrency", "must be 0..%d", MaxConcurrency)
	case c.Duration < 0:
		return invalid("Duration", "must not be negative")
	case c.Requests < 0:
		return invalid("Requests", "must not be negative")
	case c.Duration == 0 && c.Requests == 0:
		return invalid("Duration/Requests", "at least one limit is required")
	case c.RequestTimeout < 0:
		return invalid("RequestTimeout", "must not be negative")
	}
	switch c.Mode {
	case "", ClosedLoop:
		if c.Concurrency < 1 {
			return invalid("Concurrency", "must be at least 1 in closed loop")
		}
		if c.Rate != 0 {
			return invalid("Rate", "must be zero in closed loop")
		}
	case OpenLoop:
		if math.IsNaN(c.Rate) || c.Rate <= 0 || c.Rate > MaxRate {
			return invalid("Rate", "must be above 0 and at most %g in open loop", float64(MaxRate))
		}
	default:
		return invalid("Mode", "must be %q or %q", ClosedLoop, OpenLoop)
	}
	return nil
}

// withDefaults returns a copy with the zero-value defaults filled in.
func (c Config) withDefaults() Config {
	if c.API == "" {
		c.API = ChatCompletions
	}
	if c.Mode == "" {
		c.Mode = ClosedLoop
	}
	if c.Prompt == "" {
		c.Prompt = DefaultPrompt
	}
	if c.Mode == OpenLoop && c.Concurrency == 0 {
		c.Concurrency = DefaultMaxInFlight
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

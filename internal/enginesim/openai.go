package enginesim

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
)

// charsPerToken is the prompt-token estimate's divisor: about four bytes of
// English text per token, the usual rule of thumb.
const charsPerToken = 4

// request holds the few fields of an inference request the simulator reads;
// encoding/json skips every other field without decoding it. The prompt is
// never decoded either: its raw JSON length is all the estimate needs.
type request struct {
	Model               string        `json:"model"`
	Stream              bool          `json:"stream"`
	StreamOptions       streamOptions `json:"stream_options"`
	MaxTokens           optInt        `json:"max_tokens"`
	MaxCompletionTokens optInt        `json:"max_completion_tokens"`
	MaxOutputTokens     optInt        `json:"max_output_tokens"`
	Messages            rawLen        `json:"messages"`
	Prompt              rawLen        `json:"prompt"`
	Input               rawLen        `json:"input"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// errNotInteger is returned by optInt for a value that is not a
// non-negative JSON integer.
var errNotInteger = errors.New("not a non-negative integer")

// optInt is an optional non-negative JSON integer; null means absent.
type optInt struct {
	set bool
	v   int
}

// UnmarshalJSON parses a non-negative integer or null without allocating.
func (o *optInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = optInt{}
		return nil
	}
	if len(b) == 0 || len(b) > 9 {
		return errNotInteger
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return errNotInteger
		}
		v = v*10 + int(c-'0')
	}
	*o = optInt{set: true, v: v}
	return nil
}

// rawLen records the length of a JSON value's text without decoding it.
type rawLen int

// UnmarshalJSON records len(b).
func (r *rawLen) UnmarshalJSON(b []byte) error {
	if string(b) != "null" {
		*r = rawLen(len(b))
	}
	return nil
}

// promptTokens estimates the prompt's tokens: the raw JSON length of
// messages, prompt and input divided by charsPerToken, rounded up, at
// least 1.
func (r *request) promptTokens() int {
	n := int(r.Messages) + int(r.Prompt) + int(r.Input)
	return max(1, (n+charsPerToken-1)/charsPerToken)
}

// outputTokens returns the tokens to generate, whether a request limit set
// it (the finish reason is then "length"), and false in ok when the limit is
// out of range.
func (r *request) outputTokens(def int) (n int, limited, ok bool) {
	for _, o := range [...]optInt{r.MaxCompletionTokens, r.MaxTokens, r.MaxOutputTokens} {
		if o.set {
			return o.v, true, o.v >= 1 && o.v <= MaxOutputTokensLimit
		}
	}
	return def, false, true
}

// embeddingRequest holds the fields an embeddings request needs.
type embeddingRequest struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

// vocabulary is the simulated output; token i is vocabulary[i %
// len(vocabulary)], preceded by a space after the first token. Every word is
// JSON-safe, so tokens are appended to JSON strings without escaping.
var vocabulary = [...]string{
	"The", "quick", "brown", "fox", "jumps", "over", "the", "lazy",
	"dog", "while", "sluice", "routes", "every", "request", "to", "one",
}

// appendToken appends token i's text.
func appendToken(b []byte, i int) []byte {
	if i > 0 {
		b = append(b, ' ')
	}
	return append(b, vocabulary[i%len(vocabulary)]...)
}

// Text returns the text of a generation of n tokens: the words every
// response of n tokens carries, joined by single spaces. Streams carry it
// split into one delta per token.
func Text(n int) string { return string(appendText(nil, n)) }

// appendText appends tokens 0..n-1.
func appendText(b []byte, n int) []byte {
	for i := range n {
		b = appendToken(b, i)
	}
	return b
}

// generation is the per-request data every response body shares.
type generation struct {
	id         uint64
	created    int64
	prompt     int
	completion int
	finish     string
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }

// appendChatUsage appends a chat or completions usage object.
func appendChatUsage(b []byte, g *generation) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, int64(g.prompt))
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, int64(g.completion))
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, int64(g.prompt+g.completion))
	return append(b, '}')
}

// appendHead appends `{"id":"<prefix><id>","object":"<object>","created":T,"model":M`.
func appendHead(b []byte, prefix, object string, g *generation, modelJSON []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, prefix...)
	b = strconv.AppendUint(b, g.id, 10)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = appendInt(b, g.created)
	b = append(b, `,"model":`...)
	return append(b, modelJSON...)
}

const (
	chatIDPrefix       = "chatcmpl-enginesim-"
	completionIDPrefix = "cmpl-enginesim-"
	responseIDPrefix   = "resp_enginesim"
	messageIDPrefix    = "msg_enginesim"
)

// appendChatCompletion appends a non-streaming chat.completion body.
func appendChatCompletion(b []byte, g *generation, modelJSON []byte) []byte {
	b = appendHead(b, chatIDPrefix, "chat.completion", g, modelJSON)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	b = appendText(b, g.completion)
	b = append(b, `"},"logprobs":null,"finish_reason":"`...)
	b = append(b, g.finish...)
	b = append(b, `"}],"usage":`...)
	b = appendChatUsage(b, g)
	return append(b, '}')
}

// appendCompletion appends a non-streaming text_completion body.
func appendCompletion(b []byte, g *generation, modelJSON []byte) []byte {
	b = appendHead(b, completionIDPrefix, "text_completion", g, modelJSON)
	b = append(b, `,"choices":[{"index":0,"text":"`...)
	b = appendText(b, g.completion)
	b = append(b, `","logprobs":null,"finish_reason":"`...)
	b = append(b, g.finish...)
	b = append(b, `"}],"usage":`...)
	b = appendChatUsage(b, g)
	return append(b, '}')
}

// appendChatChunk appends one chat.completion.chunk. kind selects the
// delta: chunkRole (role and empty content), chunkToken (token i), or
// chunkFinish (empty delta with the finish reason).
func appendChatChunk(b []byte, g *generation, modelJSON []byte, kind chunkKind, i int) []byte {
	b = appendHead(b, chatIDPrefix, "chat.completion.chunk", g, modelJSON)
	switch kind {
	case chunkRole:
		b = append(b, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`...)
	case chunkToken:
		b = append(b, `,"choices":[{"index":0,"delta":{"content":"`...)
		b = appendToken(b, i)
		b = append(b, `"},"logprobs":null,"finish_reason":null}]}`...)
	case chunkFinish:
		b = append(b, `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
		b = append(b, g.finish...)
		b = append(b, `"}]}`...)
	case chunkUsage:
		b = append(b, `,"choices":[],"usage":`...)
		b = appendChatUsage(b, g)
		b = append(b, '}')
	}
	return b
}

// appendCompletionChunk appends one streaming text_completion chunk.
func appendCompletionChunk(b []byte, g *generation, modelJSON []byte, kind chunkKind, i int) []byte {
	b = appendHead(b, completionIDPrefix, "text_completion", g, modelJSON)
	switch kind {
	case chunkRole, chunkToken:
		b = append(b, `,"choices":[{"index":0,"text":"`...)
		b = appendToken(b, i)
		b = append(b, `","logprobs":null,"finish_reason":null}]}`...)
	case chunkFinish:
		b = append(b, `,"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"`...)
		b = append(b, g.finish...)
		b = append(b, `"}]}`...)
	case chunkUsage:
		b = append(b, `,"choices":[],"usage":`...)
		b = appendChatUsage(b, g)
		b = append(b, '}')
	}
	return b
}

// chunkKind selects the content of one streaming chunk.
type chunkKind int

const (
	chunkRole chunkKind = iota
	chunkToken
	chunkFinish
	chunkUsage
)

// appendResponseObject appends a Responses API response object. With
// complete it has status "completed", the full output message and usage;
// otherwise status "in_progress", no output and null usage.
func appendResponseObject(b []byte, g *generation, modelJSON []byte, complete bool, maxOutput int) []byte {
	b = append(b, `{"id":"`...)
	b = appendResponseID(b, g)
	b = append(b, `","object":"response","created_at":`...)
	b = appendInt(b, g.created)
	if complete {
		b = append(b, `,"status":"completed"`...)
	} else {
		b = append(b, `,"status":"in_progress"`...)
	}
	b = append(b, `,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":`...)
	if maxOutput > 0 {
		b = appendInt(b, int64(maxOutput))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = append(b, modelJSON...)
	b = append(b, `,"output":[`...)
	if complete {
		b = appendMessageItem(b, g, true)
	}
	b = append(b, `],"parallel_tool_calls":true,"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"text":{"format":{"type":"text"}},"truncation":"disabled","metadata":{},"usage":`...)
	if complete {
		b = append(b, `{"input_tokens":`...)
		b = appendInt(b, int64(g.prompt))
		b = append(b, `,"input_tokens_details":{"cached_tokens":0},"output_tokens":`...)
		b = appendInt(b, int64(g.completion))
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
		b = appendInt(b, int64(g.prompt+g.completion))
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

func appendResponseID(b []byte, g *generation) []byte {
	b = append(b, responseIDPrefix...)
	return strconv.AppendUint(b, g.id, 10)
}

func appendMessageID(b []byte, g *generation) []byte {
	b = append(b, messageIDPrefix...)
	return strconv.AppendUint(b, g.id, 10)
}

// appendMessageItem appends the assistant message output item; with
// complete it is "completed" and holds the full text, otherwise it is
// "in_progress" with no content.
func appendMessageItem(b []byte, g *generation, complete bool) []byte {
	b = append(b, `{"id":"`...)
	b = appendMessageID(b, g)
	if !complete {
		return append(b, `","type":"message","status":"in_progress","role":"assistant","content":[]}`...)
	}
	b = append(b, `","type":"message","status":"completed","role":"assistant","content":[`...)
	b = appendOutputTextPart(b, g, true)
	return append(b, `]}`...)
}

// appendOutputTextPart appends an output_text content part, empty or with
// the full text.
func appendOutputTextPart(b []byte, g *generation, full bool) []byte {
	b = append(b, `{"type":"output_text","text":"`...)
	if full {
		b = appendText(b, g.completion)
	}
	return append(b, `","annotations":[],"logprobs":[]}`...)
}

// apiError is the OpenAI error object.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError writes an OpenAI error object with status. param and code are
// null when empty.
func writeError(w http.ResponseWriter, status int, typ, code, param, message string) {
	body := apiError{Error: apiErrorBody{Message: message, Type: typ}}
	if param != "" {
		body.Error.Param = &param
	}
	if code != "" {
		body.Error.Code = &code
	}
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// modelNotFound is vLLM's error object for a model it does not serve: an
// error object whose code is the HTTP status as a number.
type modelNotFound struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// writeModelNotFound answers a request naming a model the engine does not
// serve the way vLLM does: 404 with
// {"error":{"message":"The model `M` does not exist.","type":"NotFoundError","param":"model","code":404}}.
func writeModelNotFound(w http.ResponseWriter, model string) {
	var body modelNotFound
	body.Error.Message = "The model `" + model + "` does not exist."
	body.Error.Type = "NotFoundError"
	body.Error.Param = "model"
	body.Error.Code = http.StatusNotFound
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"error":{"message":"The model does not exist.","type":"NotFoundError","param":"model","code":404}}`)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(b)
}

// embeddingInputs splits an embeddings input into the raw JSON of each
// vector's input: the elements of an array of strings or of token arrays, or
// the whole input otherwise (a string or a single token array).
func embeddingInputs(raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		if len(items) > 0 && (items[0][0] == '"' || items[0][0] == '[') {
			return items, nil
		}
	}
	return []json.RawMessage{raw}, nil
}

// appendEmbedding appends a deterministic unit vector of dim components
// derived from the FNV-1a hash of input.
func appendEmbedding(b []byte, input []byte, dim int) []byte {
	h := fnv.New64a()
	_, _ = h.Write(input)
	state := h.Sum64()
	vec := make([]float64, dim)
	var norm float64
	for i := range vec {
		state = splitmix64(state)
		v := float64(state>>11)/(1<<53)*2 - 1
		vec[i] = v
		norm += v * v
	}
	norm = math.Sqrt(norm)
	b = append(b, '[')
	for i, v := range vec {
		if i > 0 {
			b = append(b, ',')
		}
		if norm > 0 {
			v /= norm
		}
		b = strconv.AppendFloat(b, v, 'g', 8, 64)
	}
	return append(b, ']')
}

// splitmix64 is one step of the SplitMix64 generator: a cheap, well-mixed
// deterministic function of x.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

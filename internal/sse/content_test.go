package sse

import (
	"strings"
	"testing"
)

// contentCase is a body and what a Content scanner must find in it.
type contentCase struct {
	name   string
	fields Fields
	lines  bool
	body   string
	// events is the number of lines with content.
	events int
	usage  Usage
	found  bool
}

var contentCases = []contentCase{
	{
		name: "chat stream with a role-only first chunk", fields: ChatFields, lines: true,
		body: `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}}}` + "\n\n" +
			"data: [DONE]\n\n",
		events: 2, usage: Usage{Prompt: 12, Completion: 2}, found: true,
	},
	{
		name: "chat stream with spaces, CRLF and an escaped first byte", fields: ChatFields, lines: true,
		body: "data: {\"choices\": [{\"delta\": {\"content\" : \"\\nHi\"}}]}\r\n\r\n" +
			"data: {\"choices\": [{\"delta\": {\"reasoning_content\": \"hmm\", \"content\": \"x\"}}]}\r\n\r\n",
		events: 2,
	},
	{
		name: "chat tool calls", fields: ChatFields, lines: true,
		body: `data: {"choices":[{"delta":{"tool_calls":[]}}]}` + "\n\n" +
			`data: {"choices":[{"delta":{"tool_calls":[ {"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"delta":{"reasoning":"r"}}]}` + "\n\n",
		events: 2,
	},
	{
		name: "keys inside strings are text", fields: CompletionFields, lines: true,
		body: `data: {"choices":[{"content":"x","note":"say \"text\": hi","text":""}]}` + "\n\n" +
			`data: {"choices":[{"type":"text","text":"ok"}]}` + "\n\n",
		events: 1,
	},
	{
		name: "completions stream with cumulative usage", fields: CompletionFields, lines: true,
		body: `data: {"choices":[{"text":"a"}],"usage":{"prompt_tokens":4,"completion_tokens":1}}` + "\n\n" +
			`data: {"choices":[{"text":"b"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}` + "\n\n" +
			"data: [DONE]\n\n",
		events: 2, usage: Usage{Prompt: 4, Completion: 2}, found: true,
	},
	{
		name: "responses stream", fields: ResponseFields, lines: true,
		body: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
			"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"Hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]}],\"usage\":{\"input_tokens\":7,\"output_tokens\":1,\"output_tokens_details\":{\"reasoning_tokens\":0}}}}\n\n",
		events: 1, usage: Usage{Prompt: 7, Completion: 1}, found: true,
	},
	{
		name: "a line cut inside a string", fields: ChatFields, lines: true,
		body: `data: {"choices":[{"delta":{"content":"Hel` + "\n" +
			`data: {"choices":[{"delta":{"content":"lo"}}]}` + "\n\n",
		events: 2,
	},
	{
		name: "pretty non-streaming chat body", fields: ChatFields,
		body: "{\n  \"choices\": [\n    {\"message\": {\"role\": \"assistant\", \"content\": \"Hello\"}}\n  ],\n" +
			"  \"usage\": {\n    \"prompt_tokens\": 9,\n    \"completion_tokens\": 1234\n  }\n}\n",
		events: 1, usage: Usage{Prompt: 9, Completion: 1234}, found: true,
	},
	{
		name: "no usage", fields: ChatFields,
		body: `{"choices":[{"message":{"content":""}}],"usage":null}`,
	},
	{
		name: "a huge count is bounded", fields: CompletionFields,
		body:  `{"usage":{"completion_tokens":99999999999999999999999}}`,
		usage: Usage{Completion: maxCount}, found: true,
	},
}

// contentChunks feeds body to a new scanner in the chunks that cuts makes and
// returns what it found.
func contentChunks(tc contentCase, cuts ...int) (int, Usage, bool) {
	c := NewContent(tc.fields, tc.lines)
	events, prev := 0, 0
	for _, cut := range append(cuts, len(tc.body)) {
		events += c.Write([]byte(tc.body[prev:cut]))
		prev = cut
	}
	u, ok := c.Usage()
	return events, u, ok
}

func TestContent(t *testing.T) {
	for _, tc := range contentCases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, events int, u Usage, found bool) {
				t.Helper()
				if events != tc.events || u != tc.usage || found != tc.found {
					t.Fatalf("%s: events %d, usage %+v (%t); want %d, %+v (%t)", how, events, u, found, tc.events, tc.usage, tc.found)
				}
			}
			events, u, found := contentChunks(tc)
			check("whole", events, u, found)
			for i := 1; i < len(tc.body); i++ {
				events, u, found := contentChunks(tc, i)
				check("cut at "+tc.body[:i], events, u, found)
			}
			bytewise := make([]int, len(tc.body)-1)
			for i := range bytewise {
				bytewise[i] = i + 1
			}
			events, u, found = contentChunks(tc, bytewise...)
			check("byte by byte", events, u, found)
		})
	}
}

// TestContentCountsPerWrite proves Write reports the lines whose content
// it found in that call, so that a relay can time each content event.
func TestContentCountsPerWrite(t *testing.T) {
	c := NewContent(ChatFields, true)
	role := `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	tok := `data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\n"
	for i, step := range []struct {
		p    string
		want int
	}{
		{role, 0},
		{tok[:30], 0},
		{tok[30:], 1}, // the value's first byte is in this part.
		{tok + tok + role + tok, 3},
	} {
		if got := c.Write([]byte(step.p)); got != step.want {
			t.Fatalf("write %d: %d content lines, want %d", i, got, step.want)
		}
	}
}

func TestContentDoesNotAllocate(t *testing.T) {
	body := []byte(strings.Repeat(`data: {"choices":[{"delta":{"content":"tok"}}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`+"\n\n", 8))
	c := NewContent(ChatFields, true)
	if n := testing.AllocsPerRun(100, func() { c.Write(body) }); n != 0 {
		t.Fatalf("%v allocations per Write, want 0", n)
	}
}

func BenchmarkContent(b *testing.B) {
	event := []byte(`data: {"id":"chatcmpl-0123456789","object":"chat.completion.chunk","created":1700000000,"model":"llama","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	c := NewContent(ChatFields, true)
	for b.Loop() {
		c.Write(event)
	}
}

package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// fiveTokens is enginesim's text for five output tokens (docs/ENGINESIM.md:
// a fixed word sequence, one word per token).
const fiveTokens = "The quick brown fox jumps"

// newOpenAIClient returns the official client pointed at baseURL, as a user
// would configure it, without retries (the counts must be exact).
func newOpenAIClient(baseURL string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(baseURL+"/"),
		option.WithAPIKey("e2e-unused-key"),
		option.WithMaxRetries(0),
	)
}

// TestOpenAIClientThroughRouter uses the official OpenAI Go client against
// the router, as a user would: streaming and non-streaming chat, and the
// Responses API streaming and not, on a Capacity tier of two engines that,
// like vLLM, serve only the tier's servedModel and refuse its alias: every
// request names the alias and succeeds because the router sends the served
// model upstream.
func TestOpenAIClientThroughRouter(t *testing.T) {
	const alias = "e2e-openai"
	e0 := startEngine(t, "engine-0")
	e1 := startEngine(t, "engine-1")
	tr := tier{name: "openai", alias: alias, strategy: sluicev1.StrategyCapacity,
		members: []member{{"m0", e0, 4}, {"m1", e1, 4}}}
	r := startRouter(t, tr)
	client := newOpenAIClient(r.baseURL())
	ctx := context.Background()

	checkHeaders := func(t *testing.T, resp *http.Response) {
		t.Helper()
		if resp == nil {
			t.Fatal("no HTTP response captured")
		}
		if got := resp.Header.Get("X-Sluice-Tier"); got != tr.key() {
			t.Fatalf("X-Sluice-Tier = %q", got)
		}
		if got := resp.Header.Get("X-Sluice-Member"); got != "m0" && got != "m1" {
			t.Fatalf("X-Sluice-Member = %q", got)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Fatal("no X-Request-Id")
		}
	}

	t.Run("chat streaming", func(t *testing.T) {
		var httpResp *http.Response
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:               alias,
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			MaxCompletionTokens: openai.Int(5),
			StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithResponseInto(&httpResp))
		defer func() { _ = stream.Close() }()
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			chunks++
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("accumulator rejected chunk %d", chunks)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		checkHeaders(t, httpResp)
		if got := acc.Choices[0].Message.Content; got != fiveTokens {
			t.Fatalf("content %q, want %q", got, fiveTokens)
		}
		if acc.Usage.CompletionTokens != 5 || acc.Choices[0].FinishReason != "length" || acc.Model != servedModel {
			t.Fatalf("accumulated = %+v", acc.ChatCompletion)
		}
		if chunks != 1+5+1+1 { // role, tokens, finish, usage
			t.Fatalf("%d chunks", chunks)
		}
	})

	t.Run("chat", func(t *testing.T) {
		var httpResp *http.Response
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:               alias,
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			MaxCompletionTokens: openai.Int(5),
		}, option.WithResponseInto(&httpResp))
		if err != nil {
			t.Fatal(err)
		}
		checkHeaders(t, httpResp)
		if c.Choices[0].Message.Content != fiveTokens || c.Usage.CompletionTokens != 5 || c.Model != servedModel {
			t.Fatalf("completion = %+v", c)
		}
	})

	params := responses.ResponseNewParams{
		Model:           alias,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("write a haiku")},
		MaxOutputTokens: openai.Int(5),
	}
	t.Run("responses streaming", func(t *testing.T) {
		var httpResp *http.Response
		stream := client.Responses.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
		defer func() { _ = stream.Close() }()
		var (
			deltas    string
			completed responses.Response
			events    int
		)
		for stream.Next() {
			ev := stream.Current()
			events++
			switch ev.Type {
			case "response.output_text.delta":
				deltas += ev.AsResponseOutputTextDelta().Delta
			case "response.completed":
				completed = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		checkHeaders(t, httpResp)
		if deltas != fiveTokens || completed.OutputText() != fiveTokens || completed.Status != "completed" ||
			completed.Usage.OutputTokens != 5 {
			t.Fatalf("deltas %q, completed %+v", deltas, completed)
		}
		// created, in_progress, item added, part added, 5 deltas, text
		// done, part done, item done, completed.
		if events != 2+2+5+3+1 {
			t.Fatalf("%d events", events)
		}
	})

	t.Run("responses", func(t *testing.T) {
		var httpResp *http.Response
		resp, err := client.Responses.New(ctx, params, option.WithResponseInto(&httpResp))
		if err != nil {
			t.Fatal(err)
		}
		checkHeaders(t, httpResp)
		if resp.OutputText() != fiveTokens || resp.Status != "completed" || resp.Usage.OutputTokens != 5 {
			t.Fatalf("response = %+v", resp)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != alias {
			t.Fatalf("models = %+v", page.Data)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "no-such-model",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
			t.Fatalf("error = %v", err)
		}
	})
	r.awaitActive(t, tr.key(), 0)
}

// TestUpstreamModelAlias proves what upstreamModel: Alias forwards: the
// caller's model name, unchanged. An engine serving only servedModel
// refuses it with vLLM's 404, which the router relays as the engine sent
// it; an engine that also serves the alias answers.
func TestUpstreamModelAlias(t *testing.T) {
	const refused, accepted = "e2e-forward-refused", "e2e-forward-accepted"
	strict := startEngine(t, "engine-strict")
	lenient := startEngine(t, "engine-lenient", "--aliases", accepted)
	r := startRouter(t,
		tier{name: "forward-refused", alias: refused, upstream: sluicev1.UpstreamModelAlias, members: []member{{"solo", strict, 4}}},
		tier{name: "forward-accepted", alias: accepted, upstream: sluicev1.UpstreamModelAlias, members: []member{{"solo", lenient, 4}}},
	)
	client := newOpenAIClient(r.baseURL())
	ctx := context.Background()
	chat := func(model string) (*openai.ChatCompletion, error) {
		return client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:               model,
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			MaxCompletionTokens: openai.Int(5),
		})
	}

	_, err := chat(refused)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Type != "NotFoundError" ||
		apiErr.Message != "The model `"+refused+"` does not exist." {
		t.Fatalf("forwarded alias to a strict engine: error = %v, want the engine's 404", err)
	}
	c, err := chat(accepted)
	if err != nil || c.Choices[0].Message.Content != fiveTokens {
		t.Fatalf("forwarded alias to an engine serving it: %+v, %v", c, err)
	}
	r.awaitActive(t, tierNamespace+"/forward-refused", 0)
	r.awaitActive(t, tierNamespace+"/forward-accepted", 0)
}

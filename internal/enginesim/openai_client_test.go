package enginesim

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// These tests drive the simulator with the official openai-go client, the
// client the end-to-end tests use through the router, so that every body and
// stream shape is one the client actually parses.

func newOpenAIClient(h *harness) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(h.ts.URL+"/v1/"),
		option.WithAPIKey("test-key"),
		option.WithHTTPClient(h.ts.Client()),
		option.WithMaxRetries(0),
	)
}

func TestOpenAIClientChat(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIClient(h)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:               "sim/model-1",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxCompletionTokens: openai.Int(5),
	}
	want := string(appendText(nil, 5))

	completion, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if completion.Choices[0].Message.Content != want || completion.Usage.CompletionTokens != 5 ||
		completion.Usage.TotalTokens != completion.Usage.PromptTokens+5 || completion.Choices[0].FinishReason != "length" {
		t.Fatalf("completion = %+v", completion)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
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
	if acc.Choices[0].Message.Content != want || acc.Usage.CompletionTokens != 5 || acc.Choices[0].FinishReason != "length" {
		t.Fatalf("accumulated = %+v", acc.ChatCompletion)
	}
	if chunks != 1+5+1+1 { // role, tokens, finish, usage
		t.Fatalf("%d chunks", chunks)
	}
}

func TestOpenAIClientCompletionsAndEmbeddings(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIClient(h)
	ctx := context.Background()
	params := openai.CompletionNewParams{
		Model:     "sim/model-1",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")},
		MaxTokens: openai.Int(3),
	}
	completion, err := client.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if completion.Choices[0].Text != "The quick brown" || completion.Usage.CompletionTokens != 3 {
		t.Fatalf("completion = %+v", completion)
	}
	stream := client.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	text := ""
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text += c.Choices[0].Text
		}
	}
	if err := stream.Err(); err != nil || text != "The quick brown" {
		t.Fatalf("stream text %q err %v", text, err)
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "sim/model-1",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	if len(emb.Data) != 2 || len(emb.Data[1].Embedding) != DefaultEmbeddingDim {
		t.Fatalf("embeddings = %+v", emb)
	}

	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatalf("models: %v", err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "sim/model-1" {
		t.Fatalf("models = %+v", models.Data)
	}
}

func TestOpenAIClientResponses(t *testing.T) {
	h := newHarness(t, nil)
	client := newOpenAIClient(h)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:           "sim/model-1",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("write a haiku")},
		MaxOutputTokens: openai.Int(4),
	}
	want := string(appendText(nil, 4))

	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if resp.OutputText() != want || resp.Status != "completed" || resp.Usage.OutputTokens != 4 ||
		resp.Usage.TotalTokens != resp.Usage.InputTokens+4 {
		t.Fatalf("response = %+v", resp)
	}

	stream := client.Responses.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		deltas    string
		types     []string
		completed responses.Response
	)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
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
	wantTypes := responsesEvents(4)
	if len(types) != len(wantTypes) {
		t.Fatalf("event types %v, want %v", types, wantTypes)
	}
	for i := range types {
		if types[i] != wantTypes[i] {
			t.Fatalf("event types %v, want %v", types, wantTypes)
		}
	}
	if deltas != want || completed.OutputText() != want || completed.Usage.OutputTokens != 4 || completed.Status != "completed" {
		t.Fatalf("deltas %q completed %+v", deltas, completed)
	}
}

func TestOpenAIClientErrors(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ErrorRate = 1 })
	client := newOpenAIClient(h)
	ctx := context.Background()

	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "other-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Type != "NotFoundError" ||
		apiErr.Message != "The model `other-model` does not exist." {
		t.Fatalf("wrong model error = %v", err)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/model-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError || apiErr.Type != "server_error" {
		t.Fatalf("injected error = %v", err)
	}
}

func TestOpenAIClientSeesMalformedStream(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MalformedSSE = true })
	client := newOpenAIClient(h)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:     "sim/model-1",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxTokens: openai.Int(6),
	})
	defer stream.Close()
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Fatal("the client accepted a malformed chunk")
	}
}

package loadgen

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Concurrency: 2, Requests: 10}
	tests := []struct {
		desc   string
		mutate func(*Config)
		field  string // empty: valid
	}{
		{"valid closed loop", func(*Config) {}, ""},
		{"valid open loop", func(c *Config) { c.Mode, c.Rate, c.Concurrency = OpenLoop, 10, 0 }, ""},
		{"valid duration only", func(c *Config) { c.Requests, c.Duration = 0, time.Second }, ""},
		{"valid responses", func(c *Config) { c.API, c.MaxTokens = Responses, MaxTokensLimit }, ""},
		{"no base URL", func(c *Config) { c.BaseURL = "" }, "BaseURL"},
		{"relative base URL", func(c *Config) { c.BaseURL = "/v1" }, "BaseURL"},
		{"ftp base URL", func(c *Config) { c.BaseURL = "ftp://127.0.0.1/v1" }, "BaseURL"},
		{"no model", func(c *Config) { c.Model = "" }, "Model"},
		{"unknown API", func(c *Config) { c.API = "embeddings" }, "API"},
		{"negative max tokens", func(c *Config) { c.MaxTokens = -1 }, "MaxTokens"},
		{"too many max tokens", func(c *Config) { c.MaxTokens = MaxTokensLimit + 1 }, "MaxTokens"},
		{"negative concurrency", func(c *Config) { c.Concurrency = -1 }, "Concurrency"},
		{"too much concurrency", func(c *Config) { c.Concurrency = MaxConcurrency + 1 }, "Concurrency"},
		{"closed loop without workers", func(c *Config) { c.Concurrency = 0 }, "Concurrency"},
		{"closed loop with a rate", func(c *Config) { c.Rate = 1 }, "Rate"},
		{"open loop without a rate", func(c *Config) { c.Mode = OpenLoop }, "Rate"},
		{"open loop NaN rate", func(c *Config) { c.Mode, c.Rate = OpenLoop, math.NaN() }, "Rate"},
		{"open loop rate too high", func(c *Config) { c.Mode, c.Rate = OpenLoop, MaxRate*2 }, "Rate"},
		{"unknown mode", func(c *Config) { c.Mode = "burst" }, "Mode"},
		{"no limit", func(c *Config) { c.Requests = 0 }, "Duration/Requests"},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, "Duration"},
		{"negative requests", func(c *Config) { c.Requests = -1 }, "Requests"},
		{"negative timeout", func(c *Config) { c.RequestTimeout = -time.Second }, "RequestTimeout"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := base
			tc.mutate(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
}

func TestRequestBody(t *testing.T) {
	tests := []struct {
		desc string
		cfg  Config
		want string
	}{
		{"chat stream", Config{Model: "m", Prompt: "hi", MaxTokens: 3},
			`{"max_tokens":3,"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true}`},
		{"chat stream with usage", Config{Model: "m", Prompt: "hi", IncludeUsage: true},
			`{"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"completions", Config{API: Completions, Model: "m", Prompt: "hi", NoStream: true, MaxTokens: 2},
			`{"max_tokens":2,"model":"m","prompt":"hi"}`},
		{"responses", Config{API: Responses, Model: "m", Prompt: "hi", MaxTokens: 4, IncludeUsage: true},
			`{"input":"hi","max_output_tokens":4,"model":"m","stream":true}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			b, err := requestBody(&tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("body = %s, want %s", b, tc.want)
			}
			if !json.Valid(b) {
				t.Fatal("invalid JSON")
			}
		})
	}
}

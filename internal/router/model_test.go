package router

import (
	"encoding/json"
	"testing"
)

func TestModelField(t *testing.T) {
	tests := []struct {
		body  string
		model string
		ok    bool
	}{
		{`{"model":"llama","messages":[{"role":"user","content":"hi"}]}`, "llama", true},
		{` { "messages" : [ {"model":"inner"} ] , "model" : "chat" } `, "chat", true},
		{`{"model":"a","model":"b"}`, "b", true},
		{`{"model":"a","model":1}`, "", false},
		{`{"model":1,"model":"a"}`, "a", true},
		{`{"mod\u0065l":"escaped-key"}`, "escaped-key", true},
		{`{"model":"llama\u002d70b"}`, "llama-70b", true},
		{`{"model":"with \"quote\""}`, `with "quote"`, true},
		{`{"model":""}`, "", true},
		{`{"Model":"case"}`, "", false},
		{`{"model":null}`, "", false},
		{`{"model":["a"]}`, "", false},
		{`{"x":{"model":"nested"}}`, "", false},
		{`{}`, "", false},
		{`[{"model":"a"}]`, "", false},
		{`"model"`, "", false},
		{`{"model":"a"`, "", false},
		{`{"model":"a"} {"model":"b"}`, "", false},
		{`{"model":"a",}`, "", false},
		{``, "", false},
		{`{"a":1.5e3,"b":true,"c":null,"d":"}","model":"x"}`, "x", true},
	}
	for _, tt := range tests {
		m, ok := modelField([]byte(tt.body))
		if model := string(m); model != tt.model || ok != tt.ok {
			t.Errorf("modelField(%s) = %q, %v; want %q, %v", tt.body, model, ok, tt.model, tt.ok)
		}
	}
}

// referenceModel is what encoding/json says: a top-level object whose
// "model" member (last wins, exact case) is a string.
func referenceModel(body []byte) (string, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return "", false
	}
	raw, ok := obj["model"]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || raw[0] != '"' {
		return "", false
	}
	return s, true
}

func FuzzModelField(f *testing.F) {
	for _, seed := range []string{
		`{"model":"llama"}`, `{"a":[1,{"b":"}"}],"model":"x"}`, `{"model":"a","model":2}`,
		`{"mod\u0065l":"y"}`, `null`, `{"model":"\ud83d\ude00"}`, ` {"model" : "s p"} `,
	} {
		f.Add([]byte(seed))
	}
	for _, seed := range [][]byte{[]byte("{\"model\":\"\xff\"}"), []byte("{\"mo\xffdel\":\"a\"}")} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, gotOK := modelField(body)
		want, wantOK := referenceModel(body)
		if got := string(m); got != want || gotOK != wantOK {
			t.Fatalf("modelField(%q) = %q, %v; encoding/json says %q, %v", body, got, gotOK, want, wantOK)
		}
	})
}

func BenchmarkModelField(b *testing.B) {
	body := []byte(`{"model":"llama-70b","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi."}],"max_tokens":16,"stream":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := modelField(body); !ok {
			b.Fatal("no model")
		}
	}
}

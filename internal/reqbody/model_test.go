package reqbody

import (
	"bytes"
	"encoding/json"
	"reflect"
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
		ref, ok := FindModel([]byte(tt.body))
		if model := string(ref.name); model != tt.model || ok != tt.ok {
			t.Errorf("FindModel(%s) = %q, %v; want %q, %v", tt.body, model, ok, tt.model, tt.ok)
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
		ref, gotOK := FindModel(body)
		want, wantOK := referenceModel(body)
		if got := string(ref.name); got != want || gotOK != wantOK {
			t.Fatalf("FindModel(%q) = %q, %v; encoding/json says %q, %v", body, got, gotOK, want, wantOK)
		}
		if !gotOK {
			return
		}
		var v string
		if err := json.Unmarshal(body[ref.start:ref.end], &v); err != nil || v != want || ref.count < 1 {
			t.Fatalf("FindModel(%q): span %d..%d holds %q (%v), count %d; want the value %q",
				body, ref.start, ref.end, body[ref.start:ref.end], err, ref.count, want)
		}
	})
}

func BenchmarkModelField(b *testing.B) {
	body := []byte(`{"model":"llama-70b","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi."}],"max_tokens":16,"stream":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := FindModel(body); !ok {
			b.Fatal("no model")
		}
	}
}

func TestRewriteModel(t *testing.T) {
	const served = `"meta-llama/Llama-3.1-70B-Instruct"`
	tests := []struct {
		desc, body, want string
	}{
		{"first member", `{"model":"llama","stream":true}`, `{"model":` + served + `,"stream":true}`},
		{"last member, spaces kept", "{ \"messages\" : [ {\"model\":\"inner\"} ] ,\n \"model\" : \"chat\" } ",
			"{ \"messages\" : [ {\"model\":\"inner\"} ] ,\n \"model\" : " + served + " } "},
		{"escaped key and value", `{"mod\u0065l":"llama\u002d70b","n":1.50}`, `{"mod\u0065l":` + served + `,"n":1.50}`},
		{"every top-level model member", `{"model":1,"x":{"model":"keep"},"model":"a"}`,
			`{"model":` + served + `,"x":{"model":"keep"},"model":` + served + `}`},
		{"empty alias", `{"model":""}`, `{"model":` + served + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ref, ok := FindModel([]byte(tt.body))
			if !ok {
				t.Fatalf("FindModel(%s) refused", tt.body)
			}
			dst := []byte("keep:")
			got := RewriteModel(dst, []byte(tt.body), ref, []byte(served))
			if string(got) != "keep:"+tt.want {
				t.Fatalf("RewriteModel(%s) =\n%s\nwant\n%s", tt.body, got, "keep:"+tt.want)
			}
		})
	}
}

func TestJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"meta-llama/Llama-3.1-70B-Instruct": `"meta-llama/Llama-3.1-70B-Instruct"`,
		`a"b\c<d>&`:                         `"a\"b\\c<d>&"`,
		"tab\there":                         `"tab\there"`,
	} {
		if got := string(Quote(in)); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// decodeNumbers decodes a JSON document keeping numbers as written.
func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// FuzzRewriteModel checks that the rewrite changes only the model: the
// rewritten body decodes (encoding/json) to the original with "model" set
// to the served model, and with one model member every byte before and
// after its value is the caller's.
func FuzzRewriteModel(f *testing.F) {
	for _, seed := range []struct{ body, served string }{
		{`{"model":"llama","messages":[{"role":"user","content":"hi"}]}`, "meta-llama/Llama-3.1-70B-Instruct"},
		{` {"a":[1,{"model":"}"}],"model" : "x","z":null} `, "Qwen/Qwen2.5-1.5B-Instruct"},
		{`{"model":"a","model":"b"}`, "s"},
		{`{"mod\u0065l":"y","n":1e400}`, `quote"and\\backslash`},
		{`{"model":"\ud83d\ude00"}`, "<html>&"},
	} {
		f.Add([]byte(seed.body), seed.served)
	}
	f.Fuzz(func(t *testing.T, body []byte, served string) {
		ref, ok := FindModel(body)
		if !ok {
			return
		}
		q := Quote(served)
		out := RewriteModel(nil, body, ref, q)
		if !json.Valid(out) {
			t.Fatalf("RewriteModel(%q, %q) = %q: not valid JSON", body, served, out)
		}
		orig, ok := decodeNumbers(t, body).(map[string]any)
		if !ok {
			t.Fatalf("%q is not an object", body)
		}
		var want string
		if err := json.Unmarshal(q, &want); err != nil {
			t.Fatal(err)
		}
		orig["model"] = want
		if got := decodeNumbers(t, out); !reflect.DeepEqual(got, any(orig)) {
			t.Fatalf("RewriteModel(%q, %q) = %q decodes to %v, want %v", body, served, out, got, orig)
		}
		if ref.count == 1 {
			tail := body[ref.end:]
			if !bytes.Equal(out[:ref.start], body[:ref.start]) || !bytes.Equal(out[len(out)-len(tail):], tail) ||
				len(out) != len(body)-(ref.end-ref.start)+len(q) {
				t.Fatalf("RewriteModel(%q, %q) = %q changed bytes outside the model value", body, served, out)
			}
		}
	})
}

func BenchmarkRewriteModel(b *testing.B) {
	body := []byte(`{"model":"llama-70b","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi."}],"max_tokens":16,"stream":false}`)
	q := Quote("meta-llama/Llama-3.1-70B-Instruct")
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		ref, ok := FindModel(body)
		if !ok {
			b.Fatal("no model")
		}
		dst = RewriteModel(dst[:0], body, ref, q)
	}
}

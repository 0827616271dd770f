package e2e

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// enginesim's bodies are deterministic except for two fields per response
// (docs/ENGINESIM.md): the response ids, a per-engine counter that every
// generation request advances, and the creation time in Unix seconds.
var (
	// generatedIDRE matches every generated id and captures its counter.
	generatedIDRE = regexp.MustCompile(`(chatcmpl-enginesim-|cmpl-enginesim-|resp_enginesim|msg_enginesim)([0-9]+)`)
	// createdRE matches the creation times.
	createdRE = regexp.MustCompile(`"(created|created_at)":[0-9]+`)
)

// normalize returns body with the ids' counters replaced by "N" and the
// creation times by 0, and the one counter value the ids carried (-1 when
// the body has no id). Two different counters in one body fail the test.
func normalize(t *testing.T, body []byte) ([]byte, int) {
	t.Helper()
	counter := -1
	for _, m := range generatedIDRE.FindAllSubmatch(body, -1) {
		n, err := strconv.Atoi(string(m[2]))
		if err != nil || (counter >= 0 && n != counter) {
			t.Fatalf("ids with different counters in one body:\n%s", body)
		}
		counter = n
	}
	body = generatedIDRE.ReplaceAll(body, []byte("${1}N"))
	body = createdRE.ReplaceAll(body, []byte(`"$1":0`))
	return body, counter
}

// TestRelayIsByteIdentical sends each request to an engine directly (naming
// the served model) and then through the router to the same engine (a
// direct tier, the request naming its alias), and compares the raw bodies
// byte for byte. The only differences allowed are the ones
// enginesim itself makes between two identical requests: the id counter,
// which must have advanced by exactly one (so no other request reached the
// engine in between, and the router sent exactly one), and the creation
// time in seconds.
func TestRelayIsByteIdentical(t *testing.T) {
	const alias = "e2e-identity"
	e := startEngine(t, "engine")
	tr := tier{name: "identity", alias: alias, members: []member{{"solo", e, 4}}}
	r := startRouter(t, tr)

	chat := `{"model":"` + alias + `","messages":[{"role":"user","content":"say something"}],"max_tokens":7`
	completion := `{"model":"` + alias + `","prompt":"once upon a time","max_tokens":7`
	response := `{"model":"` + alias + `","input":"write a haiku","max_output_tokens":7`
	tests := []struct {
		name, path, body string
		status           int
		contentType      string
		hasID            bool
	}{
		{"chat stream", "/v1/chat/completions", chat + `,"stream":true,"stream_options":{"include_usage":true}}`, 200, "text/event-stream", true},
		{"chat", "/v1/chat/completions", chat + `}`, 200, "application/json", true},
		{"completions stream", "/v1/completions", completion + `,"stream":true}`, 200, "text/event-stream", true},
		{"completions", "/v1/completions", completion + `}`, 200, "application/json", true},
		{"responses stream", "/v1/responses", response + `,"stream":true}`, 200, "text/event-stream", true},
		{"responses", "/v1/responses", response + `}`, 200, "application/json", true},
		{"embeddings", "/v1/embeddings", `{"model":"` + alias + `","input":["a","bb"]}`, 200, "application/json", false},
		{"engine error", "/v1/chat/completions", `{"model":"` + alias + `","messages":[],"max_tokens":0,"stream":true}`, 400, "application/json", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// The engine serves only servedModel: sent directly, the body
			// names it; through the router, the alias, which the router
			// replaces.
			direct, err := postJSON(ctx, e.url()+tc.path, strings.Replace(tc.body, `"model":"`+alias+`"`, `"model":"`+servedModel+`"`, 1))
			if err != nil {
				t.Fatalf("direct: %v", err)
			}
			routed, err := postJSON(ctx, "http://"+r.front+tc.path, tc.body)
			if err != nil {
				t.Fatalf("through the router: %v", err)
			}
			if direct.status != tc.status || routed.status != tc.status {
				t.Fatalf("status direct %d, routed %d, want %d\n%s", direct.status, routed.status, tc.status, routed.body)
			}
			if got := routed.header.Get("Content-Type"); got != direct.header.Get("Content-Type") || got != tc.contentType {
				t.Fatalf("Content-Type direct %q, routed %q", direct.header.Get("Content-Type"), got)
			}
			if routed.header.Get("X-Sluice-Member") != "solo" {
				t.Fatalf("X-Sluice-Member = %q", routed.header.Get("X-Sluice-Member"))
			}
			d, dID := normalize(t, direct.body)
			g, gID := normalize(t, routed.body)
			if tc.hasID && (dID < 0 || gID != dID+1) {
				t.Fatalf("id counters: direct %d, routed %d; want consecutive", dID, gID)
			}
			if !tc.hasID && (dID >= 0 || !bytes.Equal(direct.body, routed.body)) {
				t.Fatalf("bodies differ:\ndirect: %s\nrouted: %s", direct.body, routed.body)
			}
			if !bytes.Equal(d, g) {
				t.Fatalf("bodies differ beyond ids and times:\ndirect: %q\nrouted: %q", direct.body, routed.body)
			}
		})
	}
	r.awaitActive(t, tr.key(), 0)
}

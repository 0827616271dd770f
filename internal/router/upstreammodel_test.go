package router

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// upstreamModel sets the tier's upstreamModel.
func upstreamModel(m v1alpha1.UpstreamModel) func(*v1alpha1.ReplicaTierSpec) {
	return func(s *v1alpha1.ReplicaTierSpec) { s.UpstreamModel = m }
}

// TestUpstreamModel proves which model name reaches the member: the tier's
// servedModel in place of the caller's alias (every other byte kept, the
// Content-Length that of the new body), or the caller's body unchanged when
// the tier forwards aliases or the caller already named the served model.
// The outcome keeps the alias the caller sent.
func TestUpstreamModel(t *testing.T) {
	const served = `"served/model"`
	tests := []struct {
		desc    string
		mode    v1alpha1.UpstreamModel
		aliases []string
		body    string
		want    string // what the member reads.
		alias   string // the outcome's alias.
	}{
		{desc: "absent policy sends the served model", aliases: []string{"llama"},
			body:  `{"model":"llama","stream":true,"messages":[{"role":"user","content":"model \"llama\""}]}`,
			want:  `{"model":` + served + `,"stream":true,"messages":[{"role":"user","content":"model \"llama\""}]}`,
			alias: "llama"},
		{desc: "ServedModel replaces an escaped alias", mode: v1alpha1.UpstreamModelServedModel, aliases: []string{"llama-70b"},
			body:  "{\n  \"max_tokens\": 1.0e2,\n  \"model\": \"llama\\u002d70b\"\n}",
			want:  "{\n  \"max_tokens\": 1.0e2,\n  \"model\": " + served + "\n}",
			alias: "llama-70b"},
		{desc: "ServedModel replaces every top-level model member", aliases: []string{"llama"},
			body:  `{"model":7,"tools":[{"model":"x"}],"model":"llama"}`,
			want:  `{"model":` + served + `,"tools":[{"model":"x"}],"model":` + served + `}`,
			alias: "llama"},
		{desc: "the served model named as an alias goes unchanged", aliases: []string{"served/model"},
			body:  `{ "model" : "served/model" }`,
			want:  `{ "model" : "served/model" }`,
			alias: "served/model"},
		{desc: "Alias forwards the caller's body", mode: v1alpha1.UpstreamModelAlias, aliases: []string{"llama"},
			body:  `{"model":"llama","prompt":"hi"}`,
			want:  `{"model":"llama","prompt":"hi"}`,
			alias: "llama"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			up := newUpstream(t, "gpu0", nil)
			f.apply(sourcetest.Tier("ns/llama", tt.aliases, v1alpha1.StrategyCapacity,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 4}, {ID: "gpu1", Endpoint: up.srv.URL, Max: 4}}, upstreamModel(tt.mode)))
			resp, reply := f.mustPost(pathChatCompletions, tt.body, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, reply)
			}
			o := f.outcome()
			seen := up.waitArrival(t)
			if string(seen.body) != tt.want {
				t.Errorf("member read %q, want %q", seen.body, tt.want)
			}
			if cl := seen.header.Get("Content-Length"); cl != strconv.Itoa(len(tt.want)) {
				t.Errorf("member got Content-Length %q, want %d", cl, len(tt.want))
			}
			if o.Alias != tt.alias || o.End != EndComplete {
				t.Errorf("outcome alias %q end %q, want %q %q", o.Alias, o.End, tt.alias, EndComplete)
			}
			f.assertIdle("ns/llama")
		})
	}
}

// TestUpstreamModelReconfigured proves the policy follows the tier's
// applied configuration: a tier switched from Alias to ServedModel, and a
// servedModel changed, take effect for the next request.
func TestUpstreamModelReconfigured(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	members := []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}}
	steps := []struct {
		mutate func(*v1alpha1.ReplicaTierSpec)
		want   string
	}{
		{upstreamModel(v1alpha1.UpstreamModelAlias), chat("llama")},
		{upstreamModel(""), chat("served/model")},
		{func(s *v1alpha1.ReplicaTierSpec) { s.ServedModel = "org/Other-Model" }, chat("org/Other-Model")},
	}
	for i, st := range steps {
		f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", members, st.mutate))
		if resp, reply := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("step %d: status %d: %s", i, resp.StatusCode, reply)
		}
		f.outcome()
		if seen := up.waitArrival(t); string(seen.body) != st.want {
			t.Fatalf("step %d: member read %q, want %q", i, seen.body, st.want)
		}
	}
	f.assertIdle("ns/llama")
}

// TestUpstreamModelLargeBody proves a body larger than the pooled buffers
// is rewritten whole.
func TestUpstreamModelLargeBody(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}}))
	prompt := strings.Repeat("tokens ", (2<<20)/7) // twice the largest pooled buffer (1 MiB).
	body := `{"prompt":"` + prompt + `","model":"llama"}`
	if resp, reply := f.mustPost(pathCompletions, body, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, reply)
	}
	f.outcome()
	if seen := up.waitArrival(t); string(seen.body) != `{"prompt":"`+prompt+`","model":"served/model"}` {
		t.Fatalf("member read %d bytes, not the body with the served model", len(seen.body))
	}
	f.assertIdle("ns/llama")
}

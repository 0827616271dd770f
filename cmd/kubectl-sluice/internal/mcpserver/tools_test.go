package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/transition"
	tt "github.com/sluice-dev/sluice/internal/transition/transitiontest"
)

// call calls tool with args (a JSON object) and returns the result; a
// protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s %s: protocol error %v", tool, args, err)
	}
	return res
}

// text is the result's text content.
func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content %+v, want one text", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

// decode decodes the result's structured content into v, failing on a tool
// error.
func decode(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(t, res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "127.0.0.1") || strings.Contains(string(raw), "http") {
		t.Fatalf("structured content shows an endpoint: %s", raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}

func TestListTiers(t *testing.T) {
	e := tt.New(t)
	cs, _ := connect(t, e.Client)
	var out listTiersOutput
	res := call(t, cs, toolListTiers, `{}`)
	decode(t, res, &out)
	if got := text(t, res); got != "2 tiers in namespace inference: embed, llama" {
		t.Fatalf("text %q", got)
	}
	if out.Namespace != tt.Namespace || out.Truncated || len(out.Tiers) != 2 || out.Tiers[0].Name != "embed" || out.Tiers[1].Name != "llama" {
		t.Fatalf("%+v", out)
	}
	l := out.Tiers[1]
	if l.Node != "gpu-node-1" || l.Strategy != "Capacity" || strings.Join(l.Aliases, ",") != "llama-70b,chat" ||
		l.ServedModel != "meta-llama/Llama-3.1-70B-Instruct" || l.MemberCount != 2 || l.Accepted != "True" ||
		l.Programmed != "True" || l.Ready != "Unknown" || l.TierQuiesce != "" || *l.AppliedGeneration != 3 || l.MaxConcurrency != nil {
		t.Fatalf("llama %+v", l)
	}
	if m := l.Members; len(m) != 2 || m[0].ID != "gpu0" || !*m[0].Ready || m[0].Phase != "Admitting" || m[0].Quiesce != "" || *m[0].MaxConcurrency != 32 ||
		m[1].ID != "gpu1" || m[1].Phase != "Drained" || m[1].Quiesce != "maintenance" {
		t.Fatalf("llama members %+v", m)
	}
	if q := l.Queue; q == nil || q.MaxRequests != 64 || *q.Waiting != 3 || *q.OldestWaitSeconds != 12 {
		t.Fatalf("llama queue %+v, want the router's report 3/64, oldest 12 s", q)
	}
	if em := out.Tiers[0]; em.Strategy != "Direct" || em.MemberCount != 1 || em.AppliedGeneration != nil || em.Members[0].Ready != nil || em.Queue != nil {
		t.Fatalf("embed %+v", em)
	}
	var raw struct {
		Tiers []map[string]any `json:"tiers"`
	}
	decode(t, res, &raw)
	if q, want := raw.Tiers[1]["queue"], map[string]any{"maxRequests": 64.0, "waiting": 3.0, "oldestWaitSeconds": 12.0}; !reflect.DeepEqual(q, want) {
		t.Fatalf("llama queue JSON %v, want %v", q, want)
	}
	if q, ok := raw.Tiers[0]["queue"]; !ok || q != nil {
		t.Fatalf("embed queue JSON %v (present %t), want null (no queue)", q, ok)
	}

	// Another namespace; a bad one is a tool error.
	decode(t, call(t, cs, toolListTiers, `{"namespace":"other"}`), &out)
	if out.Namespace != "other" || len(out.Tiers) != 0 {
		t.Fatalf("%+v", out)
	}
	res = call(t, cs, toolListTiers, `{"namespace":"Not-A-Namespace"}`)
	if !res.IsError || !strings.Contains(text(t, res), "namespace") {
		t.Fatalf("bad namespace: %+v", res)
	}
}

// TestTransitions walks a member through quiesce, a dry-run readmit, a
// readmit and a repeat, checking each result and each patch sent.
func TestTransitions(t *testing.T) {
	e := tt.New(t)
	cs, _ := connect(t, e.Client)
	steps := []struct {
		args        string
		wantOutcome string
		wantMsg     string
		wantPatch   string
		wantDryRun  bool
		wantGPU0    string
	}{
		{`{"action":"status","tier":"inference/llama"}`, outcomeReported,
			"inference/llama: admitting; gpu0 Admitting, gpu1 Drained (quiesced: maintenance); queue 3/64 waiting, oldest 12s", "", false, ""},
		{`{"action":"quiesce","tier":"inference/llama","member":"gpu0","reason":"driver"}`, outcomeChanged,
			"replicatier.sluice.dev/llama member gpu0 quiesced (driver)", `{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}`, false, "driver"},
		{`{"action":"quiesce","tier":"inference/llama","member":"gpu0","reason":"driver"}`, outcomeUnchanged,
			"replicatier.sluice.dev/llama member gpu0 already quiesced (driver)", "", false, "driver"},
		{`{"action":"readmit","tier":"inference/llama","member":"gpu0","dry_run":true}`, outcomeChanged,
			"replicatier.sluice.dev/llama member gpu0 readmitted (server dry run)", `{"spec":{"quiesce":{"members":{"gpu0":null}}}}`, true, "driver"},
		{`{"action":"readmit","tier":"inference/llama","member":"gpu0"}`, outcomeChanged,
			"replicatier.sluice.dev/llama member gpu0 readmitted", `{"spec":{"quiesce":{"members":{"gpu0":null}}}}`, false, ""},
		{`{"action":"readmit","tier":"inference/llama","member":"gpu0"}`, outcomeUnchanged,
			"replicatier.sluice.dev/llama member gpu0 already admitting", "", false, ""},
		{`{"action":"status","tier":"inference/llama","member":"gpu1","dry_run":true}`, outcomeReported,
			"inference/llama member gpu1: admitting; gpu1 Drained (quiesced: maintenance); queue 3/64 waiting, oldest 12s", "", false, ""},
	}
	for _, s := range steps {
		var out transitionOutput
		res := call(t, cs, toolTransition, s.args)
		decode(t, res, &out)
		if out.Outcome != s.wantOutcome || out.Message != s.wantMsg || text(t, res) != s.wantMsg || out.Status == nil || out.Tier != "inference/llama" {
			t.Fatalf("%s: %+v", s.args, out)
		}
		p := e.TakePatches()
		switch {
		case s.wantPatch == "" && len(p) != 0:
			t.Fatalf("%s: patches %+v, want none", s.args, p)
		case s.wantPatch != "" && (len(p) != 1 || p[0].Body != s.wantPatch || p[0].DryRun != s.wantDryRun):
			t.Fatalf("%s: patches %+v, want %s (dry run %v)", s.args, p, s.wantPatch, s.wantDryRun)
		}
		if got := transition.Intent(e.Tier(t, "llama"), "gpu0"); got != s.wantGPU0 {
			t.Fatalf("%s: gpu0 intent %q, want %q", s.args, got, s.wantGPU0)
		}
	}
}

// TestRefusals proves bad arguments, unknown members and member
// transitions of a direct tier are tool errors (never protocol errors)
// with a clear message, and send nothing.
func TestRefusals(t *testing.T) {
	e := tt.New(t)
	cs, _ := connect(t, e.Client)
	before := e.Tier(t, "llama").ResourceVersion
	for _, tc := range []struct{ args, want string }{
		{`{"action":"quiesce","tier":"inference/llama","member":"gpu0","reason":"x","force":true}`, `unexpected additional properties ["force"]`},
		{`{"action":"readmit","member":"gpu0"}`, `missing properties: ["tier"]`},
		{`{"action":"readmit","tier":"inference/llama","member":"` + strings.Repeat("g", 200) + `"}`, "/properties/member: maxLength"},
		{`{"action":"readmit","tier":"inference/llama","member":"gpü0"}`, "/properties/member: pattern"},
		{`{"action":"readmit","tier":"inference/llama","member":"gpu7"}`, `tier inference/llama has no member "gpu7" (members: gpu0, gpu1)`},
		{`{"action":"drain","tier":"inference/llama","member":"gpu7","dry_run":true}`, `has no member "gpu7"`},
		{`{"action":"quiesce","tier":"inference/embed","member":"gpu0","reason":"x"}`, "inference/embed has one member, so its intent is the tier's; call member_transition for the whole tier (omit member)"},
		{`{"action":"quiesce","tier":"inference/nope","reason":"x"}`, "replicatier not found: inference/nope"},
		{`{"action":"quiesce","tier":"inference/llama"}`, "quiesce needs a reason"},
		{`{"action":"readmit","tier":"inference/llama","reason":"x"}`, "reason applies to quiesce and drain"},
		{`{"action":"quiesce","tier":"inference/llama","reason":"x","timeout_seconds":3}`, "timeout_seconds applies to drain"},
		{`{"action":"drain","tier":"inference/llama","timeout_seconds":0}`, "/properties/timeout_seconds: minimum"},
		{`{"action":"explode","tier":"inference/llama"}`, "/properties/action: enum"},
		{`{"action":"status","tier":"llama"}`, "/properties/tier: pattern"},
	} {
		res := call(t, cs, toolTransition, tc.args)
		if !res.IsError || !strings.Contains(text(t, res), tc.want) {
			t.Errorf("%s: isError %v %q, want a tool error containing %q", tc.args, res.IsError, text(t, res), tc.want)
		}
		if p := e.TakePatches(); len(p) != 0 {
			t.Fatalf("%s: patches %+v", tc.args, p)
		}
	}
	if rv := e.Tier(t, "llama").ResourceVersion; rv != before {
		t.Fatalf("resourceVersion %s, was %s", rv, before)
	}
}

// TestDrain proves drain waits until the router reports the member
// Drained and reports drained; a dry run sends a dry-run quiesce and does
// not wait.
func TestDrain(t *testing.T) {
	e := tt.New(t)
	cs, _ := connect(t, e.Client)

	var out transitionOutput
	decode(t, call(t, cs, toolTransition, `{"action":"drain","tier":"inference/llama","member":"gpu0","dry_run":true,"reason":"driver"}`), &out)
	if out.Outcome != outcomeChanged || !out.DryRun || out.Message != "replicatier.sluice.dev/llama member gpu0 quiesced (driver); not waiting for the drain (server dry run)" {
		t.Fatalf("dry run: %+v", out)
	}
	if p := e.TakePatches(); len(p) != 1 || !p[0].DryRun || p[0].Body != `{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}` {
		t.Fatalf("dry run patches %+v", p)
	}

	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	stop := e.FakeRouter(t, release, draining)
	defer stop()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolTransition,
			Arguments: map[string]any{"action": "drain", "tier": "inference/llama", "member": "gpu0", "timeout_seconds": 60}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	tt.WaitFor(t, draining, "the router's report of Draining")
	tt.WaitFor(t, e.Watching, "drain's watch")
	select {
	case res := <-done:
		t.Fatalf("drain returned while the member was Draining: %+v", res)
	default:
	}
	close(release)
	res := tt.WaitFor(t, done, "drain's result")
	decode(t, res, &out)
	if out.Outcome != outcomeDrained || out.Message != "replicatier.sluice.dev/llama member gpu0 drained" ||
		len(out.Status.Members) != 1 || out.Status.Members[0].Phase != "Drained" || out.Status.Members[0].Quiesce != transition.DefaultDrainReason {
		t.Fatalf("drain: %+v", out)
	}
}

// TestDrainTimeout proves a drain that does not finish in timeout_seconds
// is a result with outcome timeout, the state it last saw and the tier as
// it is, not a tool error.
func TestDrainTimeout(t *testing.T) {
	e := tt.New(t)
	cs, _ := connect(t, e.Client)
	var out transitionOutput
	decode(t, call(t, cs, toolTransition, `{"action":"drain","tier":"inference/llama","member":"gpu0","timeout_seconds":1}`), &out)
	if out.Outcome != outcomeTimeout || !strings.HasPrefix(out.Message, "drain timed out after 1s: replicatier.sluice.dev/llama member gpu0: the router on gpu-node-1 applies generation 3 of 4") ||
		out.Status == nil || out.Status.Generation != 4 || out.Status.Members[0].Quiesce != transition.DefaultDrainReason {
		t.Fatalf("%+v", out)
	}
}

// TestErrorsNeverShowURLs proves an API server that cannot be reached, or
// refuses, gives a tool error without its URL, and the log carries none
// either.
func TestErrorsNeverShowURLs(t *testing.T) {
	// A URL as client-go names it in a transport error, with a query.
	const apiURL = "https://10.0.0.1:6443/apis/sluice.dev/v1alpha1/namespaces/inference/replicatiers/llama?watch=true"
	for _, tc := range []struct {
		desc string
		err  error
		want string
	}{
		{"unreachable", &url.Error{Op: "Get", URL: apiURL, Err: errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")},
			"the API server could not be reached"},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "sluice.dev", Resource: "replicatiers"}, "llama",
			errors.New("User \"agent\" cannot get resource \"replicatiers\" (see "+apiURL+")")),
			`the API server refused the request (Forbidden): replicatiers.sluice.dev "llama" is forbidden: User "agent" cannot get resource "replicatiers" (see <url>)`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := tt.New(t)
			c := interceptor.NewClient(e.Base, interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return tc.err
				},
				List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return tc.err
				},
			})
			cs, logs := connect(t, c)
			for _, res := range []*mcp.CallToolResult{
				call(t, cs, toolTransition, `{"action":"status","tier":"inference/llama"}`),
				call(t, cs, toolListTiers, `{}`),
			} {
				if got := text(t, res); !res.IsError || !strings.HasPrefix(got, tc.want) || strings.Contains(got, "10.0.0.1") {
					t.Fatalf("isError %v %q, want %q", res.IsError, got, tc.want)
				}
			}
			if l := logs.String(); strings.Contains(l, "10.0.0.1") || !strings.Contains(l, "tool call refused") {
				t.Fatalf("log:\n%s", l)
			}
		})
	}
}

// TestTruncatedList proves list_tiers says when a namespace holds more
// tiers than one answer lists.
func TestTruncatedList(t *testing.T) {
	e := tt.New(t)
	for i := range maxListedTiers {
		tier := e.Tier(t, "embed")
		tier.ResourceVersion, tier.Name = "", "extra-"+string(rune('a'+i/26))+string(rune('a'+i%26))
		if err := e.Base.Create(context.Background(), tier); err != nil {
			t.Fatal(err)
		}
	}
	cs, _ := connect(t, e.Client)
	var out listTiersOutput
	res := call(t, cs, toolListTiers, `{}`)
	decode(t, res, &out)
	if !out.Truncated || len(out.Tiers) != maxListedTiers || !strings.HasSuffix(text(t, res), "(truncated at 100)") {
		t.Fatalf("truncated %v, %d tiers", out.Truncated, len(out.Tiers))
	}
}

// TestNewTierViewHoldsNoEndpoint proves the projection leaves out
// endpoints and metrics locations even when the tier has them.
func TestNewTierViewHoldsNoEndpoint(t *testing.T) {
	tier := tt.New(t).Tier(t, "llama")
	tier.Spec.Members[0].Metrics = &v1alpha1.MetricsSpec{Engine: v1alpha1.EngineVLLM, Path: "/secret-metrics"}
	raw, err := json.Marshal(newTierView(tier, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{tier.Spec.Members[0].Endpoint, tier.Spec.Members[1].Endpoint, "secret-metrics", "endpoint"} {
		if strings.Contains(string(raw), leak) {
			t.Fatalf("view shows %q: %s", leak, raw)
		}
	}
}

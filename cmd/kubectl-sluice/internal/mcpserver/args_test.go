package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// transitionCases are member_transition arguments with the verdict of the
// Go checks (wantErr empty: accepted) and of the input schema. schemaOK
// marks rules the schema does not express (they depend on the action), so
// only the Go checks refuse them.
var transitionCases = []struct {
	desc     string
	args     string
	wantErr  string
	schemaOK bool
}{
	{desc: "status of a tier", args: `{"action":"status","tier":"inference/llama"}`},
	{desc: "status of a member, dry run", args: `{"action":"status","tier":"inference/llama","member":"gpu0","dry_run":true}`},
	{desc: "quiesce a member", args: `{"action":"quiesce","tier":"inference/llama","member":"gpu0","reason":"maintenance"}`},
	{desc: "readmit a tier", args: `{"action":"readmit","tier":"inference/llama"}`},
	{desc: "drain with everything", args: `{"action":"drain","tier":"inference/llama.v2","member":"gpu-0","reason":"driver","dry_run":false,"timeout_seconds":1800}`},
	{desc: "longest names", args: `{"action":"status","tier":"` + strings.Repeat("n", 63) + "/" + strings.Repeat("a", 253) + `","member":"` + strings.Repeat("m", 32) + `"}`},

	{desc: "extra property", args: `{"action":"status","tier":"inference/llama","force":true}`, wantErr: "unknown field"},
	{desc: "no action", args: `{"tier":"inference/llama"}`, wantErr: "action is required"},
	{desc: "unknown action", args: `{"action":"delete","tier":"inference/llama"}`, wantErr: `action "delete" is not one of status, quiesce, readmit, drain`},
	{desc: "member without tier", args: `{"action":"readmit","member":"gpu0"}`, wantErr: `member "gpu0" needs its tier`},
	{desc: "no tier", args: `{"action":"status"}`, wantErr: "tier is required"},
	{desc: "tier without namespace", args: `{"action":"status","tier":"llama"}`, wantErr: `tier "llama" is not namespace/name`},
	{desc: "tier with two slashes", args: `{"action":"status","tier":"a/b/c"}`, wantErr: `is not namespace/name`},
	{desc: "empty namespace", args: `{"action":"status","tier":"/llama"}`, wantErr: `tier namespace "" is not a valid namespace`},
	{desc: "empty name", args: `{"action":"status","tier":"inference/"}`, wantErr: `tier name "" is not a valid object name`},
	{desc: "uppercase namespace", args: `{"action":"status","tier":"Inference/llama"}`, wantErr: "is not a valid namespace"},
	{desc: "namespace with a dot", args: `{"action":"status","tier":"in.ference/llama"}`, wantErr: "is not a valid namespace"},
	{desc: "namespace of 64 bytes", args: `{"action":"status","tier":"` + strings.Repeat("n", 64) + `/llama"}`, wantErr: "is not a valid namespace"},
	{desc: "name with a space", args: `{"action":"status","tier":"inference/lla ma"}`, wantErr: "is not a valid object name"},
	{desc: "tier too long", args: `{"action":"status","tier":"inference/` + strings.Repeat("a", 400) + `"}`, wantErr: "tier is 410 bytes long, at most 317"},
	{desc: "member of 200 bytes", args: `{"action":"quiesce","tier":"inference/llama","member":"` + strings.Repeat("g", 200) + `","reason":"x"}`, wantErr: "member is 200 bytes long, at most 32"},
	{desc: "non-ASCII member", args: `{"action":"readmit","tier":"inference/llama","member":"gpü0"}`, wantErr: `member "gpü0" is not ASCII`},
	{desc: "uppercase member", args: `{"action":"readmit","tier":"inference/llama","member":"GPU0"}`, wantErr: `member "GPU0" does not match`},
	{desc: "member ending in a dash", args: `{"action":"readmit","tier":"inference/llama","member":"gpu-"}`, wantErr: "does not match"},
	{desc: "quiesce without reason", args: `{"action":"quiesce","tier":"inference/llama"}`, wantErr: "quiesce needs a reason", schemaOK: true},
	{desc: "reason for readmit", args: `{"action":"readmit","tier":"inference/llama","reason":"x"}`, wantErr: "reason applies to quiesce and drain, not to readmit", schemaOK: true},
	{desc: "reason for status", args: `{"action":"status","tier":"inference/llama","reason":"x"}`, wantErr: "not to status", schemaOK: true},
	{desc: "bad reason", args: `{"action":"quiesce","tier":"inference/llama","reason":"Not OK"}`, wantErr: `reason "Not OK" does not match`},
	{desc: "reason too long", args: `{"action":"quiesce","tier":"inference/llama","reason":"` + strings.Repeat("r", 64) + `"}`, wantErr: "reason is 64 bytes long, at most 63"},
	{desc: "non-ASCII reason", args: `{"action":"drain","tier":"inference/llama","reason":"wartung-ä"}`, wantErr: "is not ASCII"},
	{desc: "timeout for quiesce", args: `{"action":"quiesce","tier":"inference/llama","reason":"x","timeout_seconds":5}`, wantErr: "timeout_seconds applies to drain, not to quiesce", schemaOK: true},
	{desc: "timeout too long", args: `{"action":"drain","tier":"inference/llama","timeout_seconds":1801}`, wantErr: "timeout_seconds 1801 is outside 1..1800"},
	{desc: "negative timeout", args: `{"action":"drain","tier":"inference/llama","timeout_seconds":-1}`, wantErr: "timeout_seconds -1 is outside"},
	{desc: "timeout as a string", args: `{"action":"drain","tier":"inference/llama","timeout_seconds":"60"}`, wantErr: "cannot unmarshal"},
}

// decodeStrict decodes args as the SDK hands them over, refusing unknown
// fields the way the closed schema does.
func decodeStrict(args string, v any) error {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestCheckTransition runs every case through the Go checks: each refusal
// wraps errInvalidArgument and names the problem.
func TestCheckTransition(t *testing.T) {
	for _, tc := range transitionCases {
		t.Run(tc.desc, func(t *testing.T) {
			var in transitionInput
			err := decodeStrict(tc.args, &in)
			if err == nil {
				_, err = checkTransition(in)
				if err != nil && !errors.Is(err, errInvalidArgument) {
					t.Fatalf("err = %v, want errInvalidArgument", err)
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestInputSchemaAgrees proves the input schema the catalog publishes (and
// the SDK enforces before a handler runs) refuses what the Go checks refuse,
// but for the rules marked schemaOK.
func TestInputSchemaAgrees(t *testing.T) {
	resolved, err := transitionTool().InputSchema.(*jsonschema.Schema).Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range transitionCases {
		t.Run(tc.desc, func(t *testing.T) {
			var v map[string]any
			if err := json.Unmarshal([]byte(tc.args), &v); err != nil {
				t.Fatal(err)
			}
			err := resolved.Validate(v)
			if wantOK := tc.wantErr == "" || tc.schemaOK; (err == nil) != wantOK {
				t.Fatalf("schema verdict %v, want accepted=%v", err, wantOK)
			}
		})
	}
}

func TestCheckTransitionRequest(t *testing.T) {
	r, err := checkTransition(transitionInput{Action: "drain", Tier: "inference/llama", Member: "gpu0", TimeoutSeconds: 7})
	if err != nil || r.namespace != "inference" || r.name != "llama" || r.member != "gpu0" || r.timeout != 7*time.Second {
		t.Fatalf("%+v, %v", r, err)
	}
	r, err = checkTransition(transitionInput{Action: "drain", Tier: "inference/llama"})
	if err != nil || r.timeout != DefaultDrainTimeoutSeconds*time.Second || r.member != "" {
		t.Fatalf("default timeout: %+v, %v", r, err)
	}
}

func TestCheckListTiers(t *testing.T) {
	resolved, err := listTiersTool().InputSchema.(*jsonschema.Schema).Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns      string
		wantErr string
	}{
		{"", ""},
		{"inference", ""},
		{strings.Repeat("n", 63), ""},
		{strings.Repeat("n", 64), "namespace is 64 bytes long, at most 63"},
		{"Inference", `namespace "Inference" is not a valid namespace`},
		{"a.b", "is not a valid namespace"},
		{"nä", "is not a valid namespace"},
	} {
		err := checkListTiers(listTiersInput{Namespace: tc.ns})
		if (tc.wantErr == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errInvalidArgument))) {
			t.Errorf("namespace %q: err = %v, want %q", tc.ns, err, tc.wantErr)
		}
		args := map[string]any{}
		if tc.ns != "" {
			args["namespace"] = tc.ns
		}
		if serr := resolved.Validate(args); (serr == nil) != (tc.wantErr == "") {
			t.Errorf("namespace %q: schema verdict %v", tc.ns, serr)
		}
	}
}

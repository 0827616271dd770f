package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/transition"
	tt "github.com/sluice-dev/sluice/internal/transition/transitiontest"
	"github.com/sluice-dev/sluice/internal/version"
)

// The command's tests run it against the fake API server of transitiontest:
// tiers llama (two members, gpu1 quiesced) and embed (a direct tier) in
// namespace inference. The transitions themselves are tested in
// internal/transition; these tests prove the command line reaches them and
// prints what they return.

// env is the fake API server with the command line on top.
type env struct{ *tt.Env }

func newEnv(t *testing.T) *env { return &env{tt.New(t)} }

// run runs the command line args and returns stdout and the error.
func (e *env) run(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := newCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		func() (client.WithWatch, string, error) { return e.Client, tt.Namespace, nil })
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// intent is the scope's quiesce reason.
func intent(t *v1alpha1.ReplicaTier, member string) string { return transition.Intent(t, member) }

func TestVersion(t *testing.T) {
	out, err := newEnv(t).run("--version")
	if err != nil {
		t.Fatal(err)
	}
	if want := version.String("kubectl-sluice") + "\n"; out != want {
		t.Fatalf("--version printed %q, want %q", out, want)
	}
}

func TestStatusTable(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("status", "llama")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`inference/llama +gpu-node-1 +Capacity +3 +3 +True +True +Unknown +-`,
		`gpu0 +true +Admitting +-`,
		`gpu1 +true +Drained +maintenance`,
		`(?m)^QUEUE +3/64 waiting, oldest 12s$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	// A tier without a queue says nothing about one.
	out, err = e.run("status", "embed")
	if err != nil || strings.Contains(strings.ToLower(out), "queue") {
		t.Fatalf("status embed: %v\n%s", err, out)
	}
	out, err = e.run("status", "llama", "--member", "gpu1")
	if err != nil || strings.Contains(out, "gpu0") || !strings.Contains(out, "gpu1") {
		t.Fatalf("status --member gpu1: %v\n%s", err, out)
	}
}

func TestStatusJSON(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("status", "embed", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s transition.Status
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s.Name != "embed" || s.Strategy != "Direct" || s.AppliedGeneration != nil || s.Accepted != "Unknown" ||
		len(s.Members) != 1 || s.Members[0].Ready != nil || s.Members[0].Phase != "" || s.Queue != nil {
		t.Fatalf("status = %+v", s)
	}
	if strings.Contains(out, "queue") {
		t.Fatalf("a tier without a queue shows one:\n%s", out)
	}

	// The queue as the router reports it.
	out, err = e.run("status", "llama", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Queue map[string]any `json:"queue"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := map[string]any{"maxRequests": 64.0, "waiting": 3.0, "oldestWaitSeconds": 12.0}; !reflect.DeepEqual(doc.Queue, want) {
		t.Fatalf("queue = %v, want %v", doc.Queue, want)
	}
}

func TestChecksBeforeAnyChange(t *testing.T) {
	tests := []struct {
		desc    string
		args    []string
		wantErr error
		wantMsg string
	}{
		{desc: "unknown member quiesce", args: []string{"quiesce", "llama", "--member", "gpu7", "--reason", "x"}, wantErr: transition.ErrUnknownMember, wantMsg: "members: gpu0, gpu1"},
		{desc: "unknown member readmit", args: []string{"readmit", "llama", "--member", "gpu7"}, wantErr: transition.ErrUnknownMember},
		{desc: "unknown member drain", args: []string{"drain", "llama", "--member", "gpu7"}, wantErr: transition.ErrUnknownMember},
		{desc: "unknown member status", args: []string{"status", "llama", "--member", "gpu7"}, wantErr: transition.ErrUnknownMember},
		{desc: "direct tier member quiesce", args: []string{"quiesce", "embed", "--member", "gpu0", "--reason", "x"}, wantErr: transition.ErrDirectTier, wantMsg: "omit --member"},
		{desc: "direct tier member readmit", args: []string{"readmit", "embed", "--member", "gpu0"}, wantErr: transition.ErrDirectTier},
		{desc: "direct tier member drain", args: []string{"drain", "embed", "--member", "gpu0"}, wantErr: transition.ErrDirectTier},
		{desc: "bad reason", args: []string{"quiesce", "llama", "--reason", "Not OK"}, wantErr: transition.ErrInvalidReason},
		{desc: "unknown tier", args: []string{"quiesce", "nope", "--reason", "x"}, wantErr: transition.ErrTierNotFound},
		{desc: "member without tier", args: []string{"readmit", "--member", "gpu0"}, wantMsg: "--member needs its TIER"},
		{desc: "no tier", args: []string{"status"}, wantMsg: "a TIER argument is required"},
		{desc: "missing reason", args: []string{"quiesce", "llama"}, wantMsg: `"reason" not set`},
		{desc: "bad output", args: []string{"status", "llama", "-o", "yaml"}, wantMsg: "--output must be"},
		{desc: "bad dry run", args: []string{"readmit", "llama", "--dry-run", "client"}, wantMsg: "--dry-run must be"},
		{desc: "bad timeout", args: []string{"drain", "llama", "--timeout", "0s"}, wantMsg: "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.run(tt.args...)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if p := e.TakePatches(); len(p) != 0 {
				t.Fatalf("patches sent despite the error: %+v", p)
			}
		})
	}
}

// TestScopesAreIndependent proves each verb patches exactly its scope's key
// with a JSON merge patch, so member and tier intent never touch each other.
func TestScopesAreIndependent(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		args      []string
		wantPatch string
		wantTier  string
		wantGPU0  string
		wantGPU1  string
	}{
		{[]string{"quiesce", "llama", "--reason", "upgrade"}, `{"spec":{"quiesce":{"tier":"upgrade"}}}`, "upgrade", "", "maintenance"},
		{[]string{"readmit", "llama", "--member", "gpu1"}, `{"spec":{"quiesce":{"members":{"gpu1":null}}}}`, "upgrade", "", ""},
		{[]string{"quiesce", "llama", "--member", "gpu0", "--reason", "driver"}, `{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}`, "upgrade", "driver", ""},
		{[]string{"readmit", "llama"}, `{"spec":{"quiesce":{"tier":null}}}`, "", "driver", ""},
	}
	for _, s := range steps {
		if _, err := e.run(s.args...); err != nil {
			t.Fatalf("%v: %v", s.args, err)
		}
		p := e.TakePatches()
		if len(p) != 1 || p[0].Type != types.MergePatchType || p[0].Body != s.wantPatch || p[0].DryRun {
			t.Fatalf("%v: patches %+v, want one merge patch %s", s.args, p, s.wantPatch)
		}
		cur := e.Tier(t, "llama")
		if intent(cur, "") != s.wantTier || intent(cur, "gpu0") != s.wantGPU0 || intent(cur, "gpu1") != s.wantGPU1 {
			t.Fatalf("%v: intent tier=%q gpu0=%q gpu1=%q", s.args, intent(cur, ""), intent(cur, "gpu0"), intent(cur, "gpu1"))
		}
	}
	// Asking again for what is already so sends nothing.
	out, err := e.run("quiesce", "llama", "--member", "gpu0", "--reason", "driver")
	if err != nil || !strings.Contains(out, "already quiesced") || len(e.TakePatches()) != 0 {
		t.Fatalf("repeat quiesce: %v %q", err, out)
	}
	out, err = e.run("readmit", "llama")
	if err != nil || !strings.Contains(out, "already admitting") || len(e.TakePatches()) != 0 {
		t.Fatalf("repeat readmit: %v %q", err, out)
	}
}

func TestDryRunServer(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("quiesce", "llama", "--member", "gpu0", "--reason", "driver", "--dry-run=server")
	if err != nil || !strings.Contains(out, "(server dry run)") {
		t.Fatalf("%v %q", err, out)
	}
	if p := e.TakePatches(); len(p) != 1 || !p[0].DryRun {
		t.Fatalf("patches %+v, want one dry run", p)
	}
	if intent(e.Tier(t, "llama"), "gpu0") != "" {
		t.Fatal("a dry run changed the tier")
	}
	// drain --dry-run sends the quiesce as a dry run and does not wait.
	out, err = e.run("drain", "llama", "--member", "gpu0", "--dry-run=server")
	if err != nil || !strings.Contains(out, "not waiting") {
		t.Fatalf("drain dry run: %v %q", err, out)
	}
	if p := e.TakePatches(); len(p) != 1 || !p[0].DryRun || p[0].Body != `{"spec":{"quiesce":{"members":{"gpu0":"drain"}}}}` {
		t.Fatalf("patches %+v", p)
	}
}

// TestDrainWaitsForTheRouter proves drain quiesces the member and returns
// only once the router reports it Drained for the current generation, not
// while it is Draining.
func TestDrainWaitsForTheRouter(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	stop := e.FakeRouter(t, release, draining)
	defer stop()

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.run("drain", "llama", "--member", "gpu0", "-o", "json")
		done <- result{out, err}
	}()
	tt.WaitFor(t, draining, "the router's report of Draining")
	tt.WaitFor(t, e.Watching, "drain's watch")
	select {
	case r := <-done:
		t.Fatalf("drain returned while the member was Draining: %+v", r)
	default:
	}
	close(release)
	r := tt.WaitFor(t, done, "drain's return after Drained")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var s transition.Status
	if err := json.Unmarshal([]byte(r.out), &s); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if len(s.Members) != 1 || s.Members[0].Phase != "Drained" || s.Members[0].Quiesce != transition.DefaultDrainReason ||
		*s.AppliedGeneration != s.Generation {
		t.Fatalf("final status %+v", s)
	}
	if p := e.TakePatches(); len(p) != 1 || p[0].Body != `{"spec":{"quiesce":{"members":{"gpu0":"drain"}}}}` {
		t.Fatalf("patches %+v", p)
	}
}

// TestDrainTimesOutWithTheState proves a drain that does not finish in
// --timeout fails with ErrDrainTimeout saying what it last saw: first a
// router that has not applied the patch's generation, then a member still
// Draining.
func TestDrainTimesOutWithTheState(t *testing.T) {
	e := newEnv(t)
	_, err := e.run("drain", "llama", "--member", "gpu0", "--timeout", "300ms")
	if !errors.Is(err, transition.ErrDrainTimeout) || !strings.Contains(err.Error(), "the router on gpu-node-1 applies generation 3 of 4") {
		t.Fatalf("err = %v, want ErrDrainTimeout naming the applied generation", err)
	}
	cur := e.Tier(t, "llama")
	cur.Status.Router.AppliedGeneration = cur.Generation
	cur.Status.Members[0].Phase = v1alpha1.MemberDraining
	if err := e.Base.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	_, err = e.run("drain", "llama", "--member", "gpu0", "--timeout", "300ms")
	if !errors.Is(err, transition.ErrDrainTimeout) || !strings.Contains(err.Error(), "gpu0 Draining") {
		t.Fatalf("err = %v, want ErrDrainTimeout naming gpu0's phase", err)
	}
	if p := e.TakePatches(); len(p) != 1 {
		t.Fatalf("patches %+v, want only the first drain's", p)
	}
}

// TestExitStatus: help on stdout and 0; usage errors (kubectl's -v among
// them: it is not version here) one line and a hint on stderr and 2; a
// command that ran and failed 1, without the hint.
func TestExitStatus(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args             []string
		want             int
		stdout, stderr   string
		stdoutMustBeNone bool
	}{
		{[]string{"--help"}, 0, "Examples:\n  # a tier's members", "", false},
		{[]string{"status", "--help"}, 0, "Examples:\n  kubectl sluice status", "", false},
		// Usage lines name the command as a user types it.
		{[]string{"drain", "--help"}, 0, "Usage:\n  kubectl sluice drain TIER [--member ID] [--timeout D] [flags]\n", "", false},
		{[]string{"--version"}, 0, version.String("kubectl-sluice") + "\n", "", false},
		{[]string{"-v"}, 2, "", "error: unknown shorthand flag: 'v' in -v\nRun 'kubectl sluice --help' for usage.\n", true},
		{[]string{"-v=4", "status", "llama"}, 2, "", "unknown shorthand flag: 'v'", true},
		{[]string{"bogus"}, 2, "", "error: unknown command \"bogus\"", true},
		{[]string{"status"}, 2, "", "error: a TIER argument is required\nRun 'kubectl sluice status --help' for usage.\n", true},
		{[]string{"status", "llama", "-o", "yaml"}, 2, "", "error: --output must be table or json\n", true},
		{[]string{"quiesce", "llama"}, 2, "", `required flag(s) "reason" not set`, true},
		{[]string{"drain", "llama", "--timeout", "0s"}, 2, "", "--timeout must be positive", true},
		{[]string{"mcp", "extra"}, 2, "", "unknown command \"extra\"", true},
		{[]string{"decisions", "summarize"}, 2, "", "requires at least 1 arg", true},
		{[]string{"status", "nosuchtier"}, 1, "", "error: ", true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := newCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
				func() (client.WithWatch, string, error) { return e.Client, tt.Namespace, nil })
			cmd.SetArgs(tc.args)
			if code := Execute(cmd); code != tc.want {
				t.Errorf("exit status %d, want %d\nstdout: %s\nstderr: %s", code, tc.want, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.stdout) || (tc.stdoutMustBeNone && out.Len() > 0) {
				t.Errorf("stdout %q, want %q", out.String(), tc.stdout)
			}
			if !strings.Contains(errOut.String(), tc.stderr) || (tc.stderr == "" && errOut.Len() > 0) {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.stderr)
			}
			if hint := strings.Contains(errOut.String(), "--help' for usage"); hint != (tc.want == 2) {
				t.Errorf("usage hint %v with status %d: %q", hint, tc.want, errOut.String())
			}
		})
	}
}

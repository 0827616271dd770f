package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/version"
)

// applied is a two-member tier the manager accepted and the router applies.
func applied(quiesced bool) *v1alpha1.ReplicaTier {
	t := &v1alpha1.ReplicaTier{
		ObjectMeta: metav1.ObjectMeta{Namespace: "inference", Name: "llama", Generation: 1},
		Spec: v1alpha1.ReplicaTierSpec{NodeName: "n", Aliases: []string{"llama"}, ServedModel: "m",
			Members: []v1alpha1.Member{
				{ID: "gpu0", Endpoint: "http://127.0.0.1:1", MaxConcurrency: ptr.To[int32](2)},
				{ID: "gpu1", Endpoint: "http://127.0.0.1:2", MaxConcurrency: ptr.To[int32](2)},
			}},
		Status: v1alpha1.ReplicaTierStatus{ObservedGeneration: 1, Router: &v1alpha1.RouterStatus{Node: "n", AppliedGeneration: 1},
			Conditions: []metav1.Condition{{Type: string(v1alpha1.ConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted"}}},
	}
	if quiesced {
		t.Spec.Quiesce = &v1alpha1.QuiesceSpec{Tier: "maintenance"}
	}
	return t
}

func TestRun(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	connectTo := func(objs ...client.Object) connectFunc {
		return func(string) (client.WithWatch, error) {
			return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), nil
		}
	}
	noAPI := func(string) (client.WithWatch, error) { return nil, errors.New("no configuration") }
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("# admin\n\n  secret-token \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc       string
		args       []string
		connect    connectFunc
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"neither plan nor execute", []string{"--tier", "inference/llama"}, connectTo(applied(false)), exitUsage, "", "exactly one of --plan"},
		{"both", []string{"--tier", "inference/llama", "--plan", "--execute"}, connectTo(applied(false)), exitUsage, "", "exactly one of --plan"},
		{"no tier", []string{"--plan"}, connectTo(applied(false)), exitUsage, "", "--tier must be namespace/name"},
		{"tier without namespace", []string{"--plan", "--tier", "llama"}, connectTo(applied(false)), exitUsage, "", "--tier must be namespace/name"},
		{"stray argument", []string{"--plan", "--tier", "inference/llama", "now"}, connectTo(applied(false)), exitUsage, "", "unexpected arguments"},
		{"bad flag", []string{"--plan", "--tier", "inference/llama", "--duration", "soon"}, connectTo(applied(false)), exitUsage, "", "invalid value"},
		{"missing token file", []string{"--plan", "--tier", "inference/llama", "--admin-token-file", "/nonexistent"}, connectTo(applied(false)),
			exitUsage, "", "--admin-token-file"},
		{"no API server", []string{"--plan", "--tier", "inference/llama"}, noAPI, exitUsage, "", "no Kubernetes configuration"},
		{"no such tier", []string{"--plan", "--tier", "inference/other"}, connectTo(applied(false)), exitUsage, "", "not found"},
		{"quiesced tier", []string{"--plan", "--tier", "inference/llama"}, connectTo(applied(true)), exitUsage, "", "quiesced"},
		{"version", []string{"--version"}, noAPI, exitPass, version.String("sluice-qualify") + "\n", ""},
		{"plan", []string{"--plan", "--tier", "inference/llama", "--admin-token-file", tokenFile, "--router-admin-url", "http://127.0.0.1:9090"},
			connectTo(applied(false)), exitPass, "Nothing has been changed", ""},
		{"help", []string{"--help"}, noAPI, exitPass, "Examples:\n", ""},
		{"unknown flag", []string{"--plan", "--tier", "inference/llama", "--no-such-flag"}, connectTo(applied(false)), exitUsage, "",
			"sluice-qualify: flag provided but not defined: -no-such-flag\nRun 'sluice-qualify --help' for usage.\n"},
		{"missing key file", []string{"--plan", "--tier", "inference/llama", "--api-keys-file", "/nonexistent"}, connectTo(applied(false)),
			exitUsage, "", "--api-keys-file"},
		// The router's spelling, and the old one as a deprecated alias
		// that still reads the file and says so once.
		{"keys file", []string{"--plan", "--tier", "inference/llama", "--api-keys-file", tokenFile}, connectTo(applied(false)),
			exitPass, "Nothing has been changed", ""},
		{"deprecated key file", []string{"--plan", "--tier", "inference/llama", "--api-key-file", tokenFile}, connectTo(applied(false)),
			exitPass, "Nothing has been changed", "sluice-qualify: --api-key-file is deprecated and will be removed in the next release; use --api-keys-file\n"},
		{"deprecated key file read", []string{"--plan", "--tier", "inference/llama", "--api-key-file", "/nonexistent"}, connectTo(applied(false)),
			exitUsage, "", "--api-keys-file: open /nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr, tt.connect)
			if code != tt.wantCode || !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Fatalf("run(%q) = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q",
					tt.args, code, stdout.String(), stderr.String(), tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := readSecret(""); s != "" || err != nil {
		t.Fatalf("no file: %q, %v", s, err)
	}
	if _, err := readSecret(empty); err == nil {
		t.Fatal("a file without a token was accepted")
	}
}

package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sluice-dev/sluice/internal/cmdline"
)

// TestParseFlagsLogLevel: --log-level sets controller-runtime's level in
// any case; the deprecated --zap-log-level still sets it, with one note on
// stderr; --log-level wins over it; with neither, zap's own default (or
// --zap-devel's) stays.
func TestParseFlagsLogLevel(t *testing.T) {
	const note = "manager: --zap-log-level is deprecated and will be removed in the next release; use --log-level\n"
	for _, tc := range []struct {
		args     []string
		want     zapcore.LevelEnabler
		wantNote bool
	}{
		{nil, nil, false},
		{[]string{"--log-level", "debug"}, zapcore.DebugLevel, false},
		{[]string{"--log-level=WARN"}, zapcore.WarnLevel, false},
		{[]string{"--log-level", "error"}, zapcore.ErrorLevel, false},
		{[]string{"--zap-log-level", "debug"}, nil, true},
		{[]string{"--zap-log-level", "error", "--log-level", "info"}, zapcore.InfoLevel, true},
	} {
		var stdout, stderr bytes.Buffer
		o, err := parseFlags(tc.args, &stdout, &stderr)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		switch {
		case tc.want != nil && o.zap.Level != tc.want:
			t.Errorf("%v: level %v, want %v", tc.args, o.zap.Level, tc.want)
		case tc.want == nil && tc.wantNote && (o.zap.Level == nil || !o.zap.Level.Enabled(zapcore.DebugLevel)):
			t.Errorf("%v: the deprecated flag did not set the level: %v", tc.args, o.zap.Level)
		case tc.want == nil && !tc.wantNote && o.zap.Level != nil:
			t.Errorf("%v: level %v, want zap's default", tc.args, o.zap.Level)
		}
		if got := stderr.String(); (got == note) != tc.wantNote || (!tc.wantNote && got != "") {
			t.Errorf("%v: stderr %q, want the note: %v", tc.args, got, tc.wantNote)
		}
	}
}

// TestParseFlagsUsage: help with an example on stdout, and usage errors
// for what the command line gets wrong.
func TestParseFlagsUsage(t *testing.T) {
	var stdout bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &stdout, &bytes.Buffer{}); !errors.Is(err, cmdline.ErrHelp) ||
		!strings.Contains(stdout.String(), "Usage: manager") || !strings.Contains(stdout.String(), "Examples:\n") ||
		!strings.Contains(stdout.String(), "--zap-log-level value\n      deprecated: use --log-level") {
		t.Errorf("--help: %v\n%s", err, stdout.String())
	}
	// controller-runtime's --kubeconfig, read by ctrl.GetConfigOrDie, is still a flag.
	if _, err := parseFlags([]string{"--kubeconfig", "kubeconfig"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Errorf("--kubeconfig: %v", err)
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"--log-level", "loud"}, {"stray"}, {"--zap-log-level", "loud"}} {
		if _, err := parseFlags(args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, cmdline.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestManagerLogLines: the manager logs one JSON object a line by default
// with the keys and units of the other programs ("time", "level" in
// capitals, "msg", durations as "5s"); --log-format text and the deprecated
// --zap-encoder console give the console encoder.
func TestManagerLogLines(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     []string
		wantNote bool
	}{
		{nil, []string{`"level":"INFO"`, `"msg":"reconciled"`, `"grace":"5s"`, `"time":"`}, false},
		{[]string{"--log-format", "JSON"}, []string{`"level":"INFO"`, `"msg":"reconciled"`, `"grace":"5s"`}, false},
		{[]string{"--log-format", "text"}, []string{"\tINFO\t", "\treconciled\t", `"grace": "5s"`}, false},
		{[]string{"--zap-encoder", "console"}, []string{"\tINFO\t", "\treconciled\t"}, true},
	} {
		var stderr bytes.Buffer
		o, err := parseFlags(tc.args, &bytes.Buffer{}, &stderr)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var line bytes.Buffer
		o.zap.DestWriter = &line
		zap.New(zap.UseFlagOptions(&o.zap)).Info("reconciled", "grace", 5*time.Second)
		for _, w := range tc.want {
			if !strings.Contains(line.String(), w) {
				t.Errorf("%v: line %q lacks %q", tc.args, line.String(), w)
			}
		}
		if got := strings.Contains(stderr.String(), "--zap-encoder is deprecated"); got != tc.wantNote {
			t.Errorf("%v: deprecation note %v, want %v (%q)", tc.args, got, tc.wantNote, stderr.String())
		}
	}
	if _, err := parseFlags([]string{"--log-format", "console"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, cmdline.ErrUsage) {
		t.Errorf("--log-format console: %v, want a usage error", err)
	}
}

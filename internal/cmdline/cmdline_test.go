package cmdline

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/version"
)

// testCommand is a program with one string flag, an alias of it, a log
// level and an example.
func testCommand() (*Command, *string, *slog.Level) {
	c := New(Help{Name: "prog", Synopsis: "[flags]", Summary: "Prog does things.",
		Examples: []Example{{Comment: "do a thing", Command: "prog --keys-file k"}}})
	keys := c.Flags.String("keys-file", "", "file of keys")
	c.Alias("key-file", "keys-file")
	level := slog.LevelInfo
	c.LogLevel(&level)
	return c, keys, &level
}

// TestParse: help and version go to stdout and end the program with 0; a
// command line the flag package refuses is a usage error printed by
// Report as one line and a hint, with 2.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args                   []string
		wantErr                error
		wantCode               int
		wantStdout, wantStderr string
	}{
		{nil, nil, ExitOK, "", ""},
		{[]string{"-h"}, ErrHelp, ExitOK, "Usage: prog [flags]", ""},
		{[]string{"--help"}, ErrHelp, ExitOK, "Examples:\n  # do a thing\n  prog --keys-file k\n", ""},
		{[]string{"--version"}, ErrVersion, ExitOK, version.String("prog") + "\n", ""},
		{[]string{"--bogus"}, ErrUsage, ExitUsage, "", "prog: flag provided but not defined: -bogus\nRun 'prog --help' for usage.\n"},
		{[]string{"--log-level", "loud"}, ErrUsage, ExitUsage, "", `"loud" is not a log level`},
		{[]string{"--keys-file"}, ErrUsage, ExitUsage, "", "flag needs an argument"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, _, _ := testCommand()
			var stdout, stderr bytes.Buffer
			err := c.Parse(tc.args, &stdout, &stderr)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Parse = %v, want %v", err, tc.wantErr)
			}
			if code := Report("prog", err, &stderr); code != tc.wantCode {
				t.Errorf("Report = %d, want %d", code, tc.wantCode)
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) || (tc.wantStdout == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) || (tc.wantStderr == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.wantStderr)
			}
			if tc.wantCode == ExitUsage && strings.Count(stderr.String(), "\n") != 2 {
				t.Errorf("a usage error is one line and a hint, got %q", stderr.String())
			}
		})
	}
}

// TestHelp: the help lists every flag with two dashes and its default,
// and marks a deprecated alias.
func TestHelp(t *testing.T) {
	c, _, _ := testCommand()
	var b bytes.Buffer
	c.PrintHelp(&b)
	for _, want := range []string{
		"Usage: prog [flags]\n\nProg does things.\n\nFlags:\n",
		"  --keys-file string\n      file of keys\n",
		"  --key-file string\n      deprecated: use --keys-file; removed in the next release\n",
		"  --log-level level\n      the level of the logs: debug, info, warn or error (any case) (default info)\n",
		"  --version\n      print the version and revision and exit\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, b.String())
		}
	}
}

// TestAlias: the deprecated spelling sets the same value and prints one
// note; the current spelling prints none.
func TestAlias(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantNote bool
	}{
		{[]string{"--keys-file", "a"}, false},
		{[]string{"--key-file", "a"}, true},
		{[]string{"--key-file=a"}, true},
	} {
		c, keys, _ := testCommand()
		var stdout, stderr bytes.Buffer
		if err := c.Parse(tc.args, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if *keys != "a" {
			t.Errorf("%v: --keys-file = %q, want a", tc.args, *keys)
		}
		note := "prog: --key-file is deprecated and will be removed in the next release; use --keys-file\n"
		if got := stderr.String(); (got == note) != tc.wantNote || (!tc.wantNote && got != "") {
			t.Errorf("%v: stderr %q, want the note: %v", tc.args, got, tc.wantNote)
		}
	}
}

// TestDeprecate: a library's flag marked deprecated keeps its own value
// and usage, and IsSet tells the program it was given.
func TestDeprecate(t *testing.T) {
	c := New(Help{Name: "prog"})
	old := c.Flags.String("zap-log-level", "", "zap's level")
	c.Deprecate("zap-log-level", LogLevelFlag)
	if got := c.Flags.Lookup("zap-log-level").Usage; got != "deprecated: use --log-level; removed in the next release (zap's level)" {
		t.Errorf("usage %q", got)
	}
	var stderr bytes.Buffer
	if err := c.Parse([]string{"--zap-log-level", "debug"}, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatal(err)
	}
	if *old != "debug" || !c.IsSet("zap-log-level") || c.IsSet("version") {
		t.Errorf("value %q, set %v/%v", *old, c.IsSet("zap-log-level"), c.IsSet("version"))
	}
	if !strings.Contains(stderr.String(), "--zap-log-level is deprecated") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestLogLevel: the four levels in any case, the router's uppercase
// spelling included; anything else is refused.
func TestLogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "DEBUG": slog.LevelDebug, "Info": slog.LevelInfo,
		"warn": slog.LevelWarn, "WARN": slog.LevelWarn, "error": slog.LevelError, "ERROR": slog.LevelError,
	} {
		c, _, level := testCommand()
		if err := c.Parse([]string{"--log-level", in}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil || *level != want {
			t.Errorf("--log-level %s: %v, %v; want %v", in, *level, err, want)
		}
	}
	for _, in := range []string{"", "trace", "info+2", "warning", "-4"} {
		c, _, level := testCommand()
		err := c.Parse([]string{"--log-level", in}, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, ErrUsage) || *level != slog.LevelInfo {
			t.Errorf("--log-level %q: %v, level %v; want a usage error and info kept", in, err, *level)
		}
	}
}

// TestReport: a usage error found after parsing reads as one from the
// flag package; any other error ends with 1 and no hint.
func TestReport(t *testing.T) {
	var stderr bytes.Buffer
	if code := Report("prog", Usagef("--tier must be namespace/name, got %q", "x"), &stderr); code != ExitUsage ||
		stderr.String() != "prog: --tier must be namespace/name, got \"x\"\nRun 'prog --help' for usage.\n" {
		t.Errorf("usage: %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := Report("prog", fmt.Errorf("listen: %w", errors.New("address in use")), &stderr); code != ExitFailure ||
		stderr.String() != "prog: listen: address in use\n" {
		t.Errorf("failure: %d %q", code, stderr.String())
	}
	cause := errors.New("cause")
	if err := Usagef("wrapped: %w", cause); !errors.Is(err, cause) || !errors.Is(err, ErrUsage) {
		t.Errorf("Usagef loses its cause: %v", err)
	}
}

// TestHumanDurations: a JSON log line carries durations in human units,
// and other values unchanged.
func TestHumanDurations(t *testing.T) {
	var b strings.Builder
	logger := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: HumanDurations}))
	logger.Info("shutting down", "grace", 5*time.Second, "timeout", 1500*time.Microsecond, "tiers", 3)
	for _, want := range []string{`"grace":"5s"`, `"timeout":"1.5ms"`, `"tiers":3`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("line %s lacks %s", b.String(), want)
		}
	}
}

// TestLogging: --log-format chooses JSON (the default) or text in any
// case, refuses anything else as a usage error, and the logger writes the
// chosen format at the chosen level, durations in human units.
func TestLogging(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the line a logger writes for Info("started", "grace", 2s)
	}{
		{nil, `"msg":"started","grace":"2s"`},
		{[]string{"--log-format", "json"}, `"msg":"started","grace":"2s"`},
		{[]string{"--log-format", "TEXT"}, `msg=started grace=2s`},
		{[]string{"--log-format=text", "--log-level", "warn"}, ``},
	} {
		c := New(Help{Name: "prog"})
		var l Logging
		c.Logging(&l)
		if err := c.Parse(tc.args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		var b strings.Builder
		l.Logger(&b).Info("started", "grace", 2*time.Second)
		if got := b.String(); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%q: logged %q, want it to hold %q", tc.args, got, tc.want)
		}
	}
	for _, in := range []string{"", "logfmt", "console", "jsonl"} {
		c := New(Help{Name: "prog"})
		var l Logging
		c.Logging(&l)
		if err := c.Parse([]string{"--log-format", in}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, ErrUsage) || l.Format != LogJSON {
			t.Errorf("--log-format %q: %v, format %q; want a usage error and json kept", in, err, l.Format)
		}
	}
}

package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/router"
)

// TestMemberIdleTimeoutFlag checks --member-idle-timeout: its default, the
// accepted range, and that a bad value fails Parse with a clear error and
// leaves the value as it was.
func TestMemberIdleTimeoutFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    time.Duration
		wantErr bool
	}{
		{args: nil, want: router.DefaultMemberIdleTimeout},
		{args: []string{"--member-idle-timeout=2s"}, want: 2 * time.Second},
		{args: []string{"--member-idle-timeout=100ms"}, want: 100 * time.Millisecond},
		{args: []string{"--member-idle-timeout=10m"}, want: 10 * time.Minute},
		{args: []string{"--member-idle-timeout=99ms"}, wantErr: true},
		{args: []string{"--member-idle-timeout=11m"}, wantErr: true},
		{args: []string{"--member-idle-timeout=0"}, wantErr: true},
		{args: []string{"--member-idle-timeout=-4s"}, wantErr: true},
		{args: []string{"--member-idle-timeout=soon"}, wantErr: true},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("router", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		got := memberIdleTimeoutFlag(fs)
		err := fs.Parse(tt.args)
		if tt.wantErr {
			// flag.FlagSet.Parse quotes the error's text, not the error.
			if err == nil || !strings.Contains(err.Error(), errMemberIdleTimeout.Error()) || *got != router.DefaultMemberIdleTimeout {
				t.Errorf("%v: err %v, value %s; want errMemberIdleTimeout and the default kept", tt.args, err, *got)
			}
			continue
		}
		if err != nil || *got != tt.want {
			t.Errorf("%v: %s, %v; want %s", tt.args, *got, err, tt.want)
		}
	}
}

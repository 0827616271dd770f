package main

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestPartsFirstFailureNamed(t *testing.T) {
	errFirst, errLater := errors.New("first"), errors.New("later")
	p := newParts()
	release, returned := make(chan struct{}), make(chan struct{})
	p.run("waiting", func() error {
		defer close(returned)
		<-release
		return nil
	})
	p.run("admin", func() error { return fmt.Errorf("serve: %w", errFirst) })
	<-p.failed.Done()
	p.run("later", func() error { return errLater })
	if err := p.failure(); !errors.Is(err, errFirst) || err.Error() != "admin: serve: first" {
		t.Fatalf("failure %v, want the first failure named by its part", err)
	}
	select {
	case <-returned:
		t.Fatal("a failure stopped another part")
	default:
	}
	close(release)
	p.wait()
	<-returned
	if err := p.failure(); !errors.Is(err, errFirst) {
		t.Fatalf("failure after wait %v, want the first", err)
	}
}

func TestPartsNotFailures(t *testing.T) {
	p := newParts()
	p.run("front door", func() error { return http.ErrServerClosed })
	p.run("admin", func() error { return fmt.Errorf("serve: %w", http.ErrServerClosed) })
	p.run("readiness", func() error { return nil })
	p.wait()
	if err := p.failure(); err != nil {
		t.Fatalf("failure %v, want none: a closed server and a part that returned have not failed", err)
	}
	select {
	case <-p.failed.Done():
		t.Fatal("failed ended without a failure")
	default:
	}
}

func TestPartError(t *testing.T) {
	errDir := errors.New("no directory")
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{name: "source", err: fmt.Errorf("source: %w", errDir), want: "source: no directory"},
		{name: "api keys", err: errDir, want: "api keys: no directory"},
		{name: "source", err: fmt.Errorf("sources: %w", errDir), want: "source: sources: no directory"},
	} {
		got := partError(tt.name, tt.err)
		if got.Error() != tt.want || !errors.Is(got, errDir) {
			t.Errorf("partError(%q, %v) = %v, want %q wrapping the error", tt.name, tt.err, got, tt.want)
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/sync/errgroup"
)

// parts runs the router's long-running parts (the two servers, the
// readiness probes, the key watches and the tier source) on an errgroup:
// the first part that fails ends failed with its error, named by the part
// (partError). A server closed by its shutdown (http.ErrServerClosed) has
// not failed. A failure stops nothing by itself: the router drains, then
// stops every part, then waits for them.
type parts struct {
	group  errgroup.Group
	failed context.Context // ended by the first failure only; its cause is that failure.
	fail   context.CancelCauseFunc
}

// newParts returns an empty group of parts.
func newParts() *parts {
	failed, fail := context.WithCancelCause(context.Background())
	return &parts{failed: failed, fail: fail}
}

// run runs f as the part called name on its own goroutine.
func (p *parts) run(name string, f func() error) {
	p.group.Go(func() error {
		err := f()
		if err == nil || errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		err = partError(name, err)
		p.fail(err) // the first cause stays.
		return err
	})
}

// failure returns the first part's failure, or nil when none failed yet.
func (p *parts) failure() error { return context.Cause(p.failed) }

// wait returns once every part returned. The error that ends the run is
// the one the drain saw (failure); a part failing later, while the
// servers shut down, changes nothing.
func (p *parts) wait() { _ = p.group.Wait() }

// partError names the part of the router that failed, unless the error
// already starts with that name (the source's errors say "source: ..."),
// so that no message says it twice.
func partError(name string, err error) error {
	if strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

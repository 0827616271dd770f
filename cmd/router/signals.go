package main

import (
	"context"
	"os"
	"sync"
)

// twoSignals follows the shutdown signals arriving on sigs (SIGTERM or
// interrupt): drain ends at the first, when the router starts draining,
// and hurry at the second, when it ends the drain at once
// (docs/ROUTER.md#8-shutdown). stop ends the goroutine reading sigs and
// both contexts; it is idempotent.
func twoSignals(sigs <-chan os.Signal) (drain, hurry context.Context, stop func()) {
	drain, endDrain := context.WithCancel(context.Background())
	hurry, endHurry := context.WithCancel(context.Background())
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for _, end := range []context.CancelFunc{endDrain, endHurry} {
			select {
			case <-sigs:
				end()
			case <-quit:
				return
			}
		}
	}()
	stop = sync.OnceFunc(func() {
		close(quit)
		<-done
		endDrain()
		endHurry()
	})
	return drain, hurry, stop
}

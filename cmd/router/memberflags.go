package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/router"
)

// Bounds of --member-idle-timeout.
const (
	// minMemberIdleTimeout is the shortest accepted timeout: below it a
	// client sending a request every few hundred milliseconds would have
	// its member connection redialled for each one.
	minMemberIdleTimeout = 100 * time.Millisecond
	// maxMemberIdleTimeout is the longest accepted timeout: well past any
	// engine's own keep-alive timeout (uvicorn 5 s, nginx 75 s), beyond
	// which the engine closes first and the router only keeps dead sockets.
	maxMemberIdleTimeout = 10 * time.Minute
)

// errMemberIdleTimeout reports a --member-idle-timeout that is not a
// duration within its bounds.
var errMemberIdleTimeout = errors.New("not a duration from 100ms to 10m")

// memberIdleTimeoutFlag registers --member-idle-timeout on fs and returns
// where Parse stores its value, router.DefaultMemberIdleTimeout unless the
// flag is given. A value that is not a duration within
// minMemberIdleTimeout..maxMemberIdleTimeout fails Parse with an error
// naming the flag and errMemberIdleTimeout's text, and leaves the value
// unchanged. The value is
// router.Options.MemberIdleTimeout.
func memberIdleTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	timeout := router.DefaultMemberIdleTimeout
	fs.Func("member-idle-timeout",
		fmt.Sprintf("close a member connection idle this long; keep it below the engines' keep-alive timeout (default %s)", timeout),
		func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < minMemberIdleTimeout || d > maxMemberIdleTimeout {
				return errMemberIdleTimeout
			}
			timeout = d
			return nil
		})
	return &timeout
}

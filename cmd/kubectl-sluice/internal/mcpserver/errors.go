package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sluice-dev/sluice/internal/transition"
)

// urlRE finds URLs (scheme://...) in a message so they can be removed.
var urlRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'()<>]*`)

// redact removes every URL from msg.
func redact(msg string) string { return urlRE.ReplaceAllString(msg, "<url>") }

// toolError rewords err into what a client may see: the messages of
// argument checks and of internal/transition as they are, an API server
// refusal as its reason and message, and anything else (a transport error,
// which names the API server's URL) as a fixed sentence. No URL survives.
func toolError(err error) error {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, errInvalidArgument),
		errors.Is(err, transition.ErrTierNotFound),
		errors.Is(err, transition.ErrUnknownMember),
		errors.Is(err, transition.ErrDirectTier),
		errors.Is(err, transition.ErrInvalidReason),
		errors.Is(err, transition.ErrReadmitted),
		errors.Is(err, transition.ErrDrainTimeout):
		return errors.New(redact(err.Error()))
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("the API server did not answer in time")
	case errors.Is(err, context.Canceled):
		return errors.New("the call was cancelled")
	case errors.As(err, &status):
		s := status.Status()
		return fmt.Errorf("the API server refused the request (%s): %s", s.Reason, redact(s.Message))
	}
	return errors.New("the API server could not be reached with the kubeconfig's cluster and credentials; see the server's log")
}

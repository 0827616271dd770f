package handover

import (
	"strings"
	"testing"
)

// TestErrorsNamePackage: every sentinel's text begins with the package's
// name, so a log line's error says which part failed.
func TestErrorsNamePackage(t *testing.T) {
	for _, err := range []error{ErrProtocol, ErrSuccessorGone, ErrHandedOverAlready, ErrRefused, ErrBounds} {
		if !strings.HasPrefix(err.Error(), "handover: ") {
			t.Errorf("%q does not begin with %q", err, "handover: ")
		}
	}
}

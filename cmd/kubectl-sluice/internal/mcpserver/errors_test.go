package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-dev/sluice/internal/transition"
)

func TestToolError(t *testing.T) {
	gr := schema.GroupResource{Group: "sluice.dev", Resource: "replicatiers"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{invalid("member %q does not match", "GPU"), `invalid argument: member "GPU" does not match`},
		{fmt.Errorf("%w: inference/llama", transition.ErrTierNotFound), "replicatier not found: inference/llama"},
		{fmt.Errorf("%w after 1s: x: gpu0 Draining", transition.ErrDrainTimeout), "drain timed out after 1s: x: gpu0 Draining"},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), "the API server did not answer in time"},
		{fmt.Errorf("get: %w", context.Canceled), "the call was cancelled"},
		{apierrors.NewInvalid(schema.GroupKind{Group: "sluice.dev", Kind: "ReplicaTier"}, "llama", nil),
			`the API server refused the request (Invalid): ReplicaTier.sluice.dev "llama" is invalid`},
		{apierrors.NewConflict(gr, "llama", errors.New("see https://10.0.0.1:6443/x")),
			`the API server refused the request (Conflict): Operation cannot be fulfilled on replicatiers.sluice.dev "llama": see <url>`},
		{&url.Error{Op: "Patch", URL: "https://10.0.0.1:6443/apis", Err: errors.New("EOF")},
			"the API server could not be reached with the kubeconfig's cluster and credentials; see the server's log"},
		{errors.New("something at http://example.invalid/a?b=c"), "the API server could not be reached"},
	} {
		got := toolError(tc.err).Error()
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("toolError(%v) = %q, want prefix %q", tc.err, got, tc.want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"no url here": "no url here",
		`Get "https://10.0.0.1:6443/apis?x=1": EOF`: `Get "<url>": EOF`,
		"(see http://a/b) and ftp://c":              "(see <url>) and <url>",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

package transition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// DefaultDrainReason is the quiesce reason Drain sets when the scope is not
// quiesced yet.
const DefaultDrainReason = "drain"

// fieldOwner is the field manager of every patch the package sends.
const fieldOwner = "kubectl-sluice"

// The sentinel errors of the package; check them with errors.Is.
var (
	// ErrTierNotFound means the ReplicaTier does not exist in the namespace.
	ErrTierNotFound = errors.New("replicatier not found")
	// ErrUnknownMember means the member names no member of the tier.
	ErrUnknownMember = errors.New("no such member")
	// ErrDirectTier means a member operation was asked of a direct tier
	// (one member), whose intent is the tier's.
	ErrDirectTier = errors.New("direct tier")
	// ErrInvalidReason means the quiesce reason breaks the API's pattern.
	ErrInvalidReason = errors.New("invalid reason")
	// ErrReadmitted means the scope was readmitted while Drain waited.
	ErrReadmitted = errors.New("readmitted while draining")
	// ErrDrainTimeout means the scope did not drain before Drain's context
	// ended.
	ErrDrainTimeout = errors.New("drain timed out")
)

// reasonRE is the quiesce reason pattern of the ReplicaTier API.
var reasonRE = regexp.MustCompile(v1alpha1.QuiesceReasonPattern)

// Client reads and patches ReplicaTiers in one namespace. Its zero value is
// not usable: Client and Namespace must be set.
type Client struct {
	// Client talks to the API server; Drain needs its Watch.
	Client client.WithWatch
	// Namespace is the namespace of the tiers the Client reads and patches.
	Namespace string
	// DryRun, when true, sends every patch as a server-side dry run: the
	// API server validates and returns the result without storing it, and
	// Drain does not wait. False sends real patches.
	DryRun bool
}

// Get reads the tier name; a missing tier is ErrTierNotFound.
func (c *Client) Get(ctx context.Context, name string) (*v1alpha1.ReplicaTier, error) {
	t := &v1alpha1.ReplicaTier{}
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, t)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s/%s", ErrTierNotFound, c.Namespace, name)
	}
	return t, err
}

// MemberExists checks that id is a member of t; the error, wrapping
// ErrUnknownMember, lists the members there are.
func MemberExists(t *v1alpha1.ReplicaTier, id string) error {
	ids := make([]string, 0, len(t.Spec.Members))
	for _, m := range t.Spec.Members {
		if m.ID == id {
			return nil
		}
		ids = append(ids, m.ID)
	}
	return fmt.Errorf("%w: tier %s/%s has no member %q (members: %s)", ErrUnknownMember, t.Namespace, t.Name, id, strings.Join(ids, ", "))
}

// CheckScope checks a member scope before any change: the member exists
// (ErrUnknownMember) and the tier is a replica tier (ErrDirectTier). The
// tier scope (member empty) always passes.
func CheckScope(t *v1alpha1.ReplicaTier, member string) error {
	if member == "" {
		return nil
	}
	if err := MemberExists(t, member); err != nil {
		return err
	}
	if len(t.Spec.Members) == 1 {
		return fmt.Errorf("%w: %s/%s has one member, so its intent is the tier's; run this for the whole tier (omit --member)",
			ErrDirectTier, t.Namespace, t.Name)
	}
	return nil
}

// CheckReason checks a quiesce reason against the API's pattern; the error
// wraps ErrInvalidReason.
func CheckReason(reason string) error {
	if !reasonRE.MatchString(reason) {
		return fmt.Errorf("%w %q: use 1-63 lowercase letters, digits and dashes, starting with a letter or digit", ErrInvalidReason, reason)
	}
	return nil
}

// Intent returns the scope's quiesce reason in the spec (the tier's when
// member is empty), empty when it admits.
func Intent(t *v1alpha1.ReplicaTier, member string) string {
	q := t.Spec.Quiesce
	switch {
	case q == nil:
		return ""
	case member == "":
		return q.Tier
	}
	return string(q.Members[member])
}

// quiescePatch is the JSON merge patch setting exactly the scope's intent;
// a nil reason removes it (readmit).
func quiescePatch(member string, reason *string) []byte {
	var quiesce map[string]any
	if member == "" {
		quiesce = map[string]any{"tier": reason}
	} else {
		quiesce = map[string]any{"members": map[string]any{member: reason}}
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"quiesce": quiesce}})
	if err != nil {
		panic(err) // unreachable: strings and maps always encode.
	}
	return body
}

// patch sends a merge patch to the tier and returns the patched object (as
// the server would store it, for a dry run).
func (c *Client) patch(ctx context.Context, t *v1alpha1.ReplicaTier, body []byte) (*v1alpha1.ReplicaTier, error) {
	out := t.DeepCopy()
	opts := []client.PatchOption{client.FieldOwner(fieldOwner)}
	if c.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Client.Patch(ctx, out, client.RawPatch(types.MergePatchType, body), opts...); err != nil {
		return nil, err
	}
	return out, nil
}

// scopeName names the scope in messages.
func scopeName(t *v1alpha1.ReplicaTier, member string) string {
	s := "replicatier.sluice.dev/" + t.Name
	if member != "" {
		s += " member " + member
	}
	return s
}

// dryRunSuffix marks messages of server-side dry runs.
func (c *Client) dryRunSuffix() string {
	if c.DryRun {
		return " (server dry run)"
	}
	return ""
}

// Quiesce sets the scope's quiesce reason (the tier's when member is
// empty) and returns the tier as patched and a one-line result. Asking for
// the reason already set sends nothing.
func (c *Client) Quiesce(ctx context.Context, name, member, reason string) (*v1alpha1.ReplicaTier, string, error) {
	if err := CheckReason(reason); err != nil {
		return nil, "", err
	}
	t, err := c.Get(ctx, name)
	if err != nil {
		return nil, "", err
	}
	if err := CheckScope(t, member); err != nil {
		return nil, "", err
	}
	if Intent(t, member) == reason {
		return t, fmt.Sprintf("%s already quiesced (%s)", scopeName(t, member), reason), nil
	}
	out, err := c.patch(ctx, t, quiescePatch(member, &reason))
	if err != nil {
		return nil, "", err
	}
	return out, fmt.Sprintf("%s quiesced (%s)%s", scopeName(t, member), reason, c.dryRunSuffix()), nil
}

// Readmit removes the scope's quiesce reason and returns the tier as
// patched and a one-line result. A scope that admits already sends
// nothing.
func (c *Client) Readmit(ctx context.Context, name, member string) (*v1alpha1.ReplicaTier, string, error) {
	t, err := c.Get(ctx, name)
	if err != nil {
		return nil, "", err
	}
	if err := CheckScope(t, member); err != nil {
		return nil, "", err
	}
	if Intent(t, member) == "" {
		return t, fmt.Sprintf("%s already admitting", scopeName(t, member)), nil
	}
	out, err := c.patch(ctx, t, quiescePatch(member, nil))
	if err != nil {
		return nil, "", err
	}
	return out, fmt.Sprintf("%s readmitted%s", scopeName(t, member), c.dryRunSuffix()), nil
}

// scopeMembers lists the member ids of the scope, sorted.
func scopeMembers(t *v1alpha1.ReplicaTier, member string) []string {
	if member != "" {
		return []string{member}
	}
	ids := make([]string, 0, len(t.Spec.Members))
	for _, m := range t.Spec.Members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

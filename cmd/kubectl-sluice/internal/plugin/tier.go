package plugin

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

// The sentinel errors of the package; check them with errors.Is.
var (
	// ErrTierNotFound means the ReplicaTier does not exist in the namespace.
	ErrTierNotFound = errors.New("replicatier not found")
	// ErrUnknownMember means --member names no member of the tier.
	ErrUnknownMember = errors.New("no such member")
	// ErrDirectTier means a member operation was asked of a direct tier
	// (one member), whose intent is the tier's.
	ErrDirectTier = errors.New("direct tier")
	// ErrInvalidReason means the quiesce reason breaks the API's pattern.
	ErrInvalidReason = errors.New("invalid reason")
	// ErrReadmitted means the scope was readmitted while drain waited.
	ErrReadmitted = errors.New("readmitted while draining")
	// ErrDrainTimeout means the scope did not drain within --timeout.
	ErrDrainTimeout = errors.New("drain timed out")
)

// reasonRE is the quiesce reason pattern of the ReplicaTier API.
var reasonRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// tierClient reads and patches ReplicaTiers in one namespace.
type tierClient struct {
	c         client.WithWatch
	namespace string
	dryRun    bool
}

// get reads the tier name.
func (tc *tierClient) get(ctx context.Context, name string) (*v1alpha1.ReplicaTier, error) {
	t := &v1alpha1.ReplicaTier{}
	err := tc.c.Get(ctx, types.NamespacedName{Namespace: tc.namespace, Name: name}, t)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s/%s", ErrTierNotFound, tc.namespace, name)
	}
	return t, err
}

// memberExists checks that id is a member of t.
func memberExists(t *v1alpha1.ReplicaTier, id string) error {
	ids := make([]string, 0, len(t.Spec.Members))
	for _, m := range t.Spec.Members {
		if m.ID == id {
			return nil
		}
		ids = append(ids, m.ID)
	}
	return fmt.Errorf("%w: tier %s/%s has no member %q (members: %s)", ErrUnknownMember, t.Namespace, t.Name, id, strings.Join(ids, ", "))
}

// checkScope checks a member scope before any change: the member exists
// and the tier is a replica tier. The tier scope always passes.
func checkScope(t *v1alpha1.ReplicaTier, member string) error {
	if member == "" {
		return nil
	}
	if err := memberExists(t, member); err != nil {
		return err
	}
	if len(t.Spec.Members) == 1 {
		return fmt.Errorf("%w: %s/%s has one member, so its intent is the tier's; run this for the whole tier (omit --member)",
			ErrDirectTier, t.Namespace, t.Name)
	}
	return nil
}

// intent returns the scope's quiesce reason in the spec, empty when it
// admits.
func intent(t *v1alpha1.ReplicaTier, member string) string {
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
func (tc *tierClient) patch(ctx context.Context, t *v1alpha1.ReplicaTier, body []byte) (*v1alpha1.ReplicaTier, error) {
	out := t.DeepCopy()
	opts := []client.PatchOption{client.FieldOwner("kubectl-sluice")}
	if tc.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := tc.c.Patch(ctx, out, client.RawPatch(types.MergePatchType, body), opts...); err != nil {
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
func (tc *tierClient) dryRunSuffix() string {
	if tc.dryRun {
		return " (server dry run)"
	}
	return ""
}

// quiesce sets the scope's quiesce reason.
func (tc *tierClient) quiesce(ctx context.Context, name, member, reason string) (*v1alpha1.ReplicaTier, string, error) {
	if !reasonRE.MatchString(reason) {
		return nil, "", fmt.Errorf("%w %q: use 1-63 lowercase letters, digits and dashes, starting with a letter or digit", ErrInvalidReason, reason)
	}
	t, err := tc.get(ctx, name)
	if err != nil {
		return nil, "", err
	}
	if err := checkScope(t, member); err != nil {
		return nil, "", err
	}
	if intent(t, member) == reason {
		return t, fmt.Sprintf("%s already quiesced (%s)", scopeName(t, member), reason), nil
	}
	out, err := tc.patch(ctx, t, quiescePatch(member, &reason))
	if err != nil {
		return nil, "", err
	}
	return out, fmt.Sprintf("%s quiesced (%s)%s", scopeName(t, member), reason, tc.dryRunSuffix()), nil
}

// readmit removes the scope's quiesce reason.
func (tc *tierClient) readmit(ctx context.Context, name, member string) (*v1alpha1.ReplicaTier, string, error) {
	t, err := tc.get(ctx, name)
	if err != nil {
		return nil, "", err
	}
	if err := checkScope(t, member); err != nil {
		return nil, "", err
	}
	if intent(t, member) == "" {
		return t, fmt.Sprintf("%s already admitting", scopeName(t, member)), nil
	}
	out, err := tc.patch(ctx, t, quiescePatch(member, nil))
	if err != nil {
		return nil, "", err
	}
	return out, fmt.Sprintf("%s readmitted%s", scopeName(t, member), tc.dryRunSuffix()), nil
}

// scopeMembers lists the member ids of the scope.
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

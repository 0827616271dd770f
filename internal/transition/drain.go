package transition

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Drain quiesces the scope (the whole tier when member is empty) with
// DefaultDrainReason unless its own intent already quiesces it, then
// watches the tier until the router on the tier's node applies the tier's
// current generation and reports every member of the scope Drained. It
// returns the drained tier and a one-line result. With DryRun it sends the
// quiesce as a dry run and does not wait.
//
// ctx bounds the whole operation: when it ends before the scope drained,
// Drain fails with ErrDrainTimeout saying what it last saw; timeout is only
// named in that message. A scope readmitted meanwhile fails with
// ErrReadmitted. Drain never cancels a request.
//
// The watch's first list may be served from the API server's watch cache,
// which can lag behind the patch just written; views of the tier older than
// the generation Drain wrote (or read) are skipped, so a lagging list is
// never mistaken for a readmit or for a finished drain.
func (c *Client) Drain(ctx context.Context, name, member string, timeout time.Duration) (*v1alpha1.ReplicaTier, string, error) {
	return c.DrainWithReason(ctx, name, member, DefaultDrainReason, timeout)
}

// DrainWithReason is Drain quiescing with reason instead of
// DefaultDrainReason when the scope is not quiesced yet; a scope already
// quiesced keeps its reason. A malformed reason fails with ErrInvalidReason
// before any request.
func (c *Client) DrainWithReason(ctx context.Context, name, member, reason string, timeout time.Duration) (*v1alpha1.ReplicaTier, string, error) {
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
	if Intent(t, member) == "" {
		if t, err = c.patch(ctx, t, quiescePatch(member, &reason)); err != nil {
			return nil, "", err
		}
		if c.DryRun {
			return t, fmt.Sprintf("%s quiesced (%s); not waiting for the drain (server dry run)", scopeName(t, member), reason), nil
		}
	} else if c.DryRun {
		return t, fmt.Sprintf("%s already quiesced (%s); nothing to change (server dry run)", scopeName(t, member), Intent(t, member)), nil
	}

	last, minGeneration := t, t.Generation
	cond := func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("%s/%s was deleted while draining", c.Namespace, name)
		}
		cur, ok := ev.Object.(*v1alpha1.ReplicaTier)
		if !ok || cur.Name != name || cur.Generation < minGeneration {
			return false, nil
		}
		last = cur
		if Intent(cur, member) == "" {
			return false, fmt.Errorf("%w: %s", ErrReadmitted, scopeName(cur, member))
		}
		return Drained(cur, member), nil
	}
	_, err = watchtools.UntilWithSync(ctx, c.listWatch(name), &v1alpha1.ReplicaTier{}, nil, cond)
	switch {
	case err == nil:
		return last, fmt.Sprintf("%s drained", scopeName(last, member)), nil
	case ctx.Err() != nil && !errors.Is(err, ErrReadmitted):
		return nil, "", fmt.Errorf("%w after %v: %s: %s", ErrDrainTimeout, timeout, scopeName(last, member), describeDrain(last, member))
	}
	return nil, "", err
}

// Drained reports whether the router on the tier's node applies the tier's
// current generation and reports every member of the scope (the whole tier
// when member is empty) Drained.
func Drained(t *v1alpha1.ReplicaTier, member string) bool {
	r := t.Status.Router
	if r == nil || r.AppliedGeneration != t.Generation {
		return false
	}
	phases := memberPhases(t)
	for _, id := range scopeMembers(t, member) {
		if phases[id] != v1alpha1.MemberDrained {
			return false
		}
	}
	return true
}

// memberPhases maps the members the router reports to their phases.
func memberPhases(t *v1alpha1.ReplicaTier) map[string]v1alpha1.MemberPhase {
	phases := make(map[string]v1alpha1.MemberPhase, len(t.Status.Members))
	for _, m := range t.Status.Members {
		phases[m.ID] = m.Phase
	}
	return phases
}

// describeDrain says why a scope is not drained yet.
func describeDrain(t *v1alpha1.ReplicaTier, member string) string {
	r := t.Status.Router
	switch {
	case r == nil:
		return "no router has reported on this tier"
	case r.AppliedGeneration != t.Generation:
		return fmt.Sprintf("the router on %s applies generation %d of %d", r.Node, r.AppliedGeneration, t.Generation)
	}
	phases := memberPhases(t)
	var parts []string
	for _, id := range scopeMembers(t, member) {
		p := string(phases[id])
		if p == "" {
			p = "not reported"
		}
		parts = append(parts, id+" "+p)
	}
	return strings.Join(parts, ", ")
}

// plainListWatch is a ListWatch that opts out of watch-list (streaming)
// requests: Drain reads one object, and a plain list then watch works with
// every API server and client.
type plainListWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported opts out of watch-list requests.
func (plainListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// listWatch lists and watches the one tier name, with a field selector on
// metadata.name.
func (c *Client) listWatch(name string) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	return plainListWatch{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			list := &v1alpha1.ReplicaTierList{}
			if err := c.Client.List(ctx, list, &client.ListOptions{Raw: &opts, Namespace: c.Namespace}); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return c.Client.Watch(ctx, &v1alpha1.ReplicaTierList{}, &client.ListOptions{Raw: &opts, Namespace: c.Namespace})
		},
	}}
}

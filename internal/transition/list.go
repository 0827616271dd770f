package transition

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// List reads the tiers of the Client's namespace, at most limit of them
// (limit must be positive). truncated reports that the namespace holds
// more; the caller narrows its question rather than paging through an
// unbounded answer.
func (c *Client) List(ctx context.Context, limit int64) (tiers []v1alpha1.ReplicaTier, truncated bool, err error) {
	list := &v1alpha1.ReplicaTierList{}
	if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace), client.Limit(limit)); err != nil {
		return nil, false, err
	}
	return list.Items, list.Continue != "", nil
}

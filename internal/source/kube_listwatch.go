package source

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// NodeNameField is the ReplicaTier field the kube source selects on. It is
// a selectable field of the CRD, so the API server filters by node and a
// router receives only its own node's tiers.
const NodeNameField = "spec.nodeName"

// NewTierListerWatcher returns the lister-watcher of the ReplicaTiers of
// node in every namespace, with the field selector spec.nodeName=node on
// every list and watch request. The router needs list and watch on
// replicatiers for it, nothing more. The selector is what the router asks
// for, not a limit on its token: RBAC cannot grant a list for one field
// selector (docs/KUBERNETES.md#the-router-writes-only-its-own-nodes-tiers).
func NewTierListerWatcher(c client.WithWatch, node string) cache.ListerWatcherWithContext {
	selector := fields.OneTermEqualSelector(NodeNameField, node).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			// No paging: the field selector bounds the answer to one node's
			// tiers.
			opts.FieldSelector, opts.Limit, opts.Continue = selector, 0, ""
			list := &v1alpha1.ReplicaTierList{}
			if err := c.List(ctx, list, &client.ListOptions{Raw: &opts}); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return c.Watch(ctx, &v1alpha1.ReplicaTierList{}, &client.ListOptions{Raw: &opts})
		},
	}
}

package handover

import (
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source"
)

// failSafe bounds every wait of a test on an event; it is a deadline for a
// broken test, never the way a test waits for something.
const failSafe = 20 * time.Second

// memberSpec is a member for newTier.
type memberSpec struct {
	id       string
	endpoint string
	max      int32 // 0: no ceiling.
}

// newTier builds a defaulted source tier "ns/name" on gpu-node-1. It does
// not validate, so tests may use sub-second upstream timeouts.
func newTier(key string, aliases []string, strategy v1alpha1.Strategy, members []memberSpec, mutate ...func(*v1alpha1.ReplicaTierSpec)) source.Tier {
	ns, name, _ := strings.Cut(key, "/")
	spec := v1alpha1.ReplicaTierSpec{NodeName: "gpu-node-1", Aliases: aliases, ServedModel: "served/model", Strategy: strategy}
	for _, m := range members {
		mb := v1alpha1.Member{ID: m.id, Endpoint: m.endpoint}
		if m.max > 0 {
			mb.MaxConcurrency = &m.max
		}
		spec.Members = append(spec.Members, mb)
	}
	for _, f := range mutate {
		f(&spec)
	}
	tier := v1alpha1.ReplicaTier{Spec: spec}
	v1alpha1.Default(&tier)
	return source.Tier{Key: key, Namespace: ns, Name: name, File: name + ".yaml", Spec: tier.Spec}
}

package sourcetest

import (
	"strings"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/source"
)

// Member is one member of a tier that Tier builds.
type Member struct {
	// ID is the member's id.
	ID string
	// Endpoint is the member's base URL.
	Endpoint string
	// Max is the member's maxConcurrency; zero leaves it unset (no
	// ceiling).
	Max int32
}

// Tier builds the defaulted source tier key ("namespace/name") on node
// gpu-node-1, serving the model "served/model" under aliases with strategy
// ("": none set) and members in order, from the file "name.yaml". Each
// mutate function changes the spec before v1alpha1.Default completes it. Tier does
// not validate, so tests may use sub-second upstream timeouts.
func Tier(key string, aliases []string, strategy v1alpha1.Strategy, members []Member, mutate ...func(*v1alpha1.ReplicaTierSpec)) source.Tier {
	ns, name, _ := strings.Cut(key, "/")
	spec := v1alpha1.ReplicaTierSpec{NodeName: "gpu-node-1", Aliases: aliases, ServedModel: "served/model", Strategy: strategy}
	for _, m := range members {
		mb := v1alpha1.Member{ID: m.ID, Endpoint: m.Endpoint}
		if m.Max > 0 {
			mb.MaxConcurrency = &m.Max
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

// Snapshot is a snapshot serving tiers, with nothing rejected.
func Snapshot(tiers ...source.Tier) source.Snapshot {
	return source.Snapshot{Tiers: tiers}
}

package v1alpha1

import "slices"

// AliasLoss is one alias a tier cannot have because another tier on its node
// holds it.
type AliasLoss struct {
	// Alias is the contested alias.
	Alias string
	// Holder is the namespace/name of the tier that keeps it.
	Holder string
}

// ByCreation gives precedence to the older tier; equal creation times are
// ordered by namespace/name. The manager resolves conflicts with it.
func ByCreation(a, b *ReplicaTier) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return ByName(a, b)
}

// ByName gives precedence to the tier whose namespace/name sorts first. The
// router's file source, which has no creation times, resolves conflicts
// with it.
func ByName(a, b *ReplicaTier) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// LostAliases lists the aliases of tier that a valid tier with precedence
// (before reports whether its first argument has precedence) on
// the same node also claims, in the order of tier's aliases. Peers may
// include tier itself (matched by namespace/name) and tiers of other nodes;
// both are skipped, as are peers being deleted. A peer's claim does not
// depend on whether it won its own other aliases, so losses never cascade.
func LostAliases(tier *ReplicaTier, peers []ReplicaTier, before func(a, b *ReplicaTier) bool) []AliasLoss {
	var lost []AliasLoss
	for _, alias := range tier.Spec.Aliases {
		var holder *ReplicaTier
		for i := range peers {
			p := &peers[i]
			if (p.Namespace == tier.Namespace && p.Name == tier.Name) || p.Spec.NodeName != tier.Spec.NodeName ||
				!p.DeletionTimestamp.IsZero() || !slices.Contains(p.Spec.Aliases, alias) || !before(p, tier) {
				continue
			}
			if len(Validate(p)) > 0 {
				continue
			}
			if holder == nil || before(p, holder) {
				holder = p
			}
		}
		if holder != nil {
			lost = append(lost, AliasLoss{Alias: alias, Holder: holder.Namespace + "/" + holder.Name})
		}
	}
	return lost
}

package source

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Snapshot is one complete view of the tier configuration of a node. A
// source publishes a new Snapshot for every change and never modifies one
// it has published; receivers must not modify it either.
type Snapshot struct {
	// Tiers are the tiers to serve, sorted by Key. Each is valid, defaulted,
	// on this node and holds all of its aliases.
	Tiers []Tier
	// Rejected are the tiers of this node that are not served, sorted by
	// Key, with the reason.
	Rejected []Rejection
	// Errors are the files whose current content is invalid, sorted by File.
	// The tiers such a file held before it turned invalid stay in Tiers.
	Errors []FileError
	// Files is the number of manifest files the files source read, valid or
	// not; zero for the kube source.
	Files int
	// OtherNodes counts the tiers read for other nodes, which are skipped.
	// The kube source asks the API server for this node's tiers only, so it
	// reports none.
	OtherNodes OtherNodes
}

// OtherNodes counts the tiers of a snapshot's manifests that name another
// node in spec.nodeName.
type OtherNodes struct {
	// Tiers is the number of such tiers, in the current (or, for an invalid
	// file, last good) content of every file.
	Tiers int
	// Nodes are the distinct node names they name, sorted, at most
	// MaxReportedNodes of them. A name that is not a valid node name is
	// reported as "(invalid node name)".
	Nodes []string
}

// Tier is one ReplicaTier as the router applies it.
type Tier struct {
	// Key is "namespace/name", the tier's identity in the router, its admin
	// API, logs and response headers.
	Key string
	// Namespace is the tier's namespace; "default" when the manifest has
	// none.
	Namespace string
	// Name is the tier's name.
	Name string
	// File is the base name of the manifest file that declares the tier;
	// empty for the kube source.
	File string
	// Generation is the metadata.generation the kube source applies; zero
	// for the files source, whose manifests have none.
	Generation int64
	// Spec is the defaulted, validated spec. Its quiesce field is the
	// admission intent to apply: spec.quiesce of the manifest in files mode,
	// the manager's status.admission in kube mode.
	Spec v1alpha1.ReplicaTierSpec
}

// Reason says why a valid tier of this node is not served.
type Reason string

// The closed set of Reason values.
const (
	// ReasonAliasConflict means a tier whose namespace/name sorts first
	// claims one of the tier's aliases, as v1alpha1.ByName decides.
	ReasonAliasConflict Reason = "AliasConflict"
	// ReasonDuplicate means a file that sorts first already declares a tier
	// with the same namespace/name.
	ReasonDuplicate Reason = "Duplicate"
	// ReasonNotAccepted means the manager has not accepted the tier's
	// current generation and the kube source applied no earlier one.
	ReasonNotAccepted Reason = "NotAccepted"
	// ReasonMemberLimit means serving the tier would exceed MaxMembers; the
	// kube source serves the older tiers first.
	ReasonMemberLimit Reason = "MemberLimit"
)

// Rejection is a tier of this node that is not served. The files source
// rejects only valid tiers; the kube source also lists tiers the manager has
// not accepted.
type Rejection struct {
	// Tier is the rejected tier.
	Tier Tier
	// Reason is why it is not served.
	Reason Reason
	// Message names the tiers or files that win, for example
	// `alias "chat" is held by default/llama`.
	Message string
}

// FileError is a manifest file whose current content is rejected.
type FileError struct {
	// File is the file's base name; "." is the directory itself.
	File string
	// Message says what is wrong, by document index and field path. It never
	// quotes field values.
	Message string
	// KeepsLastGood reports whether the tiers of the file's last valid
	// content stay in Tiers; false when the file was never valid (or is
	// ignored for MaxMembers), so none of its tiers is served.
	KeepsLastGood bool
}

// build combines the last good tiers of every file, in file name order, into
// a Snapshot: the first declaration of a namespace/name wins, then alias
// conflicts are resolved with v1alpha1.ByName. The tiers are deep-copied so
// the Snapshot shares nothing with the source's state.
func build(files []fileTiers, errs []FileError) Snapshot {
	var s Snapshot
	declared := map[string]string{} // key → file
	var accepted []v1alpha1.ReplicaTier
	var owners []string
	for _, f := range files {
		for i := range f.tiers {
			t := &f.tiers[i]
			key := t.Namespace + "/" + t.Name
			if first, dup := declared[key]; dup {
				s.Rejected = append(s.Rejected, Rejection{
					Tier:    newTier(t, f.name),
					Reason:  ReasonDuplicate,
					Message: fmt.Sprintf("tier %s is already declared in file %s", key, first),
				})
				continue
			}
			declared[key] = f.name
			accepted = append(accepted, *t)
			owners = append(owners, f.name)
		}
	}
	for i := range accepted {
		t := &accepted[i]
		if lost := v1alpha1.LostAliases(t, accepted, v1alpha1.ByName); len(lost) > 0 {
			parts := make([]string, len(lost))
			for j, l := range lost {
				parts[j] = fmt.Sprintf("alias %q is held by %s", l.Alias, l.Holder)
			}
			s.Rejected = append(s.Rejected, Rejection{
				Tier:    newTier(t, owners[i]),
				Reason:  ReasonAliasConflict,
				Message: strings.Join(parts, "; "),
			})
			continue
		}
		s.Tiers = append(s.Tiers, newTier(t, owners[i]))
	}
	slices.SortFunc(s.Tiers, func(a, b Tier) int { return cmp.Compare(a.Key, b.Key) })
	slices.SortStableFunc(s.Rejected, func(a, b Rejection) int { return cmp.Compare(a.Tier.Key, b.Tier.Key) })
	s.Errors = slices.Clone(errs)
	slices.SortFunc(s.Errors, func(a, b FileError) int { return cmp.Compare(a.File, b.File) })
	return s
}

// newTier deep-copies a parsed ReplicaTier into a Tier.
func newTier(t *v1alpha1.ReplicaTier, file string) Tier {
	return Tier{
		Key:       t.Namespace + "/" + t.Name,
		Namespace: t.Namespace,
		Name:      t.Name,
		File:      file,
		Spec:      *t.Spec.DeepCopy(),
	}
}

// fileTiers is the last good content of one file.
type fileTiers struct {
	name  string
	tiers []v1alpha1.ReplicaTier
}

package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// maxConditionMessage bounds a condition message: enough for the first few
// validation errors, far below the API's 32 KiB limit.
const maxConditionMessage = 1024

// managerStatus is the part of a ReplicaTier's status the manager owns. The
// router owns status.members and status.router; the manager only reads them.
type managerStatus struct {
	observedGeneration int64
	memberCount        int32
	conditions         []metav1.Condition
	admission          *sluicev1.AdmissionStatus
}

// desiredStatus computes the manager-owned status of tier from its spec, the
// other tiers on its node (for alias conflicts) and the router-owned status.
// It is pure: now stamps only conditions whose status changes.
func desiredStatus(tier *sluicev1.ReplicaTier, peers []sluicev1.ReplicaTier, now metav1.Time) managerStatus {
	gen := tier.Generation
	out := managerStatus{
		observedGeneration: gen,
		memberCount:        tier.Status.MemberCount,
		conditions:         slices.Clone(tier.Status.Conditions),
		admission:          tier.Status.Admission.DeepCopy(),
	}
	set := func(t sluicev1.ConditionType, ok bool, reason sluicev1.ConditionReason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		c := metav1.Condition{
			Type: string(t), Status: status, Reason: string(reason),
			Message: truncate(msg, maxConditionMessage), ObservedGeneration: gen, LastTransitionTime: now,
		}
		meta.SetStatusCondition(&out.conditions, c)
	}

	accepted := true
	if errs := sluicev1.Validate(tier); len(errs) > 0 {
		// An invalid spec keeps the last valid admission intent and count.
		accepted = false
		set(sluicev1.ConditionAccepted, false, sluicev1.ReasonInvalidSpec, errs.ToAggregate().Error())
	} else {
		out.memberCount = int32(len(tier.Spec.Members)) //nolint:gosec // at most MaxMembers, validated above.
		out.admission = admissionFor(&tier.Spec)
		if lost := sluicev1.LostAliases(tier, peers, sluicev1.ByCreation); len(lost) > 0 {
			accepted = false
			parts := make([]string, len(lost))
			for i, l := range lost {
				parts[i] = fmt.Sprintf("alias %q is held by %s", l.Alias, l.Holder)
			}
			set(sluicev1.ConditionAccepted, false, sluicev1.ReasonAliasConflict, strings.Join(parts, "; "))
		} else {
			set(sluicev1.ConditionAccepted, true, sluicev1.ReasonAccepted, "spec is valid and holds its aliases")
		}
	}

	router := tier.Status.Router
	switch {
	case !accepted:
		set(sluicev1.ConditionProgrammed, false, sluicev1.ReasonNotAccepted, "the tier is not accepted")
	case router == nil:
		set(sluicev1.ConditionProgrammed, false, sluicev1.ReasonNoRouter, "no router has reported on this tier")
	case router.ApplyError != nil && router.ApplyError.Generation == gen:
		set(sluicev1.ConditionProgrammed, false, sluicev1.ReasonApplyFailed, applyFailedMessage(router, gen))
	case router.AppliedGeneration == gen:
		set(sluicev1.ConditionProgrammed, true, sluicev1.ReasonApplied,
			fmt.Sprintf("router on %s applies generation %d", router.Node, gen))
	default:
		set(sluicev1.ConditionProgrammed, false, sluicev1.ReasonPending,
			fmt.Sprintf("router on %s applies generation %d of %d", router.Node, router.AppliedGeneration, gen))
	}

	admitting := admittingMembers(tier)
	switch {
	case !accepted:
		set(sluicev1.ConditionReady, false, sluicev1.ReasonNotAccepted, "the tier is not accepted")
	case router == nil:
		set(sluicev1.ConditionReady, false, sluicev1.ReasonNoRouter, "no router has reported on this tier")
	case admitting == 0:
		set(sluicev1.ConditionReady, false, sluicev1.ReasonNoMemberAdmitting, "no member is both ready and admitting")
	default:
		set(sluicev1.ConditionReady, true, sluicev1.ReasonMembersAdmitting,
			fmt.Sprintf("%d of %d members ready and admitting", admitting, len(tier.Spec.Members)))
	}
	return out
}

// admissionFor turns valid quiesce intent into the admission status: the
// tier intent and exactly the quiesced members, sorted by id.
func admissionFor(spec *sluicev1.ReplicaTierSpec) *sluicev1.AdmissionStatus {
	a := &sluicev1.AdmissionStatus{}
	if q := spec.Quiesce; q != nil {
		a.Tier = sluicev1.TierAdmission{Quiesced: q.Tier != "", Reason: q.Tier}
		for id, reason := range q.Members {
			a.Members = append(a.Members, sluicev1.MemberAdmission{ID: id, Quiesced: true, Reason: string(reason)})
		}
		slices.SortFunc(a.Members, func(x, y sluicev1.MemberAdmission) int { return cmp.Compare(x.ID, y.ID) })
	}
	return a
}

// admittingMembers counts the members of the current spec that the router
// reports ready and admitting.
func admittingMembers(tier *sluicev1.ReplicaTier) int {
	n := 0
	for _, m := range tier.Status.Members {
		if m.Ready && m.Phase == sluicev1.MemberAdmitting && memberInSpec(&tier.Spec, m.ID) {
			n++
		}
	}
	return n
}

func memberInSpec(spec *sluicev1.ReplicaTierSpec, id string) bool {
	return slices.ContainsFunc(spec.Members, func(m sluicev1.Member) bool { return m.ID == id })
}

// applyFailedMessage says which router cannot apply generation gen, why,
// and which generation it applies instead. The router's message names
// members and rules, never endpoints.
func applyFailedMessage(router *sluicev1.RouterStatus, gen int64) string {
	applies := "it applies no generation of this tier"
	if router.AppliedGeneration > 0 {
		applies = fmt.Sprintf("it still applies generation %d", router.AppliedGeneration)
	}
	return fmt.Sprintf("router on %s cannot apply generation %d (%s): %s", router.Node, gen, applies, router.ApplyError.Message)
}

// truncate returns s cut to at most n bytes, ending in "..." when cut. It
// cuts on a rune boundary, so valid UTF-8 stays valid; invalid bytes in s
// are replaced with U+FFFD first, as the API server requires valid UTF-8.
func truncate(s string, n int) string {
	const ellipsis = "..."
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	keep, tail := n-len(ellipsis), ellipsis
	if keep < 0 {
		keep, tail = max(n, 0), ""
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + tail
}

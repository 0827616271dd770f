package admission

import (
	"fmt"
	"slices"
	"strings"
)

// errHandedOverRefusal is what Acquire returns on a tier that handed its
// admission over: it wraps ErrTierQuiesced, so a caller mapping refusals
// treats it as a quiesced tier, and ErrHandedOver, so a caller that can
// forward the request elsewhere recognizes it.
var errHandedOverRefusal = fmt.Errorf("%w: %w", ErrTierQuiesced, ErrHandedOver)

// MemberCount is the number of leases one member holds.
type MemberCount struct {
	// Member is the member id.
	Member string
	// Active is the member's reservation count.
	Active int
}

// Change is one reservation change of a tier that handed its admission
// over: Delta is +1 for a reservation (Adopt) and -1 for a release.
type Change struct {
	// Member is the member id.
	Member string
	// Delta is +1 or -1.
	Delta int
}

// Handover is a tier's record of its admission having been handed over to
// another owner (a router replacing this one): from HandOver on, the tier
// admits nothing, and every reservation change of its leases is queued on
// the Handover for its owner to take. The queue is bounded by the leases
// the tier held when it handed over (each releases once) plus any Adopt
// made afterwards. Create one with Tier.HandOver.
type Handover struct {
	tier    *Tier
	pending []Change        // guarded by tier.mu.
	signal  chan<- struct{} // sent to, without blocking, when a change is queued.
}

// HandOver stops the tier's admissions and starts reporting its reservation
// changes, atomically under the tier lock: it returns the members' active
// counts at that instant (current and removed members holding leases,
// sorted by id, members with no lease included) and a Handover on which
// every later release and adoption is queued, so that the counts plus the
// queued changes are always exactly the tier's counts. From then on
// Acquire refuses with an error wrapping both ErrTierQuiesced and
// ErrHandedOver, whatever the quiesce intent, and every request waiting in
// the tier's queue is refused at once with an error wrapping ErrTierQuiesced
// and ErrQueueHandedOver. Only one Handover can be
// active: a second call returns ErrHandedOver and changes nothing until
// the first is Cancelled.
//
// Each queued change is followed by a send on signal that never blocks, so
// signal should have a buffer of at least one; several tiers may share it.
//
// With no Handover active, the only cost to Acquire and Release is a nil
// check under the lock they already hold.
func (t *Tier) HandOver(signal chan<- struct{}) (*Handover, []MemberCount, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.handover != nil {
		return nil, nil, fmt.Errorf("%w: already handed over", ErrHandedOver)
	}
	h := &Handover{tier: t, signal: signal}
	t.handover = h
	t.refuseAllLocked(errQueueHandedOverRefusal)
	counts := make([]MemberCount, 0, len(t.members)+len(t.retired))
	for _, m := range slices.Concat(t.members, t.retired) {
		counts = append(counts, MemberCount{Member: m.id, Active: m.active})
	}
	slices.SortFunc(counts, func(a, b MemberCount) int { return strings.Compare(a.Member, b.Member) })
	return h, counts, nil
}

// Take returns the pending changes in the order they happened and empties
// the queue. It returns nil when none is pending.
func (h *Handover) Take() []Change {
	t := h.tier
	t.mu.Lock()
	defer t.mu.Unlock()
	out := h.pending
	h.pending = nil
	return out
}

// Cancel ends the Handover: the tier admits again (as its quiesce intent
// says) and reports nothing more. Pending changes are dropped. Cancelling
// a Handover that is no longer active does nothing.
func (h *Handover) Cancel() {
	t := h.tier
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.handover == h {
		t.handover = nil
		h.pending = nil
	}
}

// noteLocked queues one change and signals the owner without blocking.
// t.mu is held.
func (h *Handover) noteLocked(member string, delta int) {
	h.pending = append(h.pending, Change{Member: member, Delta: delta})
	select {
	case h.signal <- struct{}{}:
	default:
	}
}

// Adopt reserves member for a request that another owner of this tier's
// admission already admitted (the router this one replaces) and returns
// the Lease that holds the reservation. It ignores ceilings and quiesce,
// since the request is admitted already, so the member and tier counts
// may stand above their ceilings until leases are released; Acquire then
// refuses until they are below. The cursor does not move. It returns
// ErrUnknownMember, changing nothing, when member is not a current member.
func (t *Tier) Adopt(member string) (*Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, found := slices.BinarySearch(t.view.Load().ids, member)
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMember, member)
	}
	m := t.members[i]
	m.active++
	t.active++
	if t.handover != nil {
		t.handover.noteLocked(m.id, +1)
	}
	return &Lease{tier: t, member: m}, nil
}

package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Quiesce stops new admissions for scope, recording reason (which must match
// ValidReason). Quiescing an already quiesced scope replaces its reason.
// Leases already held are untouched; requests waiting in the tier's queue
// are refused with ErrTierQuiesced when the tier is quiesced, or with
// ErrNoEligibleMember when no member is left to admit them. It returns ErrInvalidReason or
// ErrUnknownMember, changing nothing, when the reason or member is invalid.
//
// Quiesce and Readmit are for callers that own one scope at a time (tests,
// tools). A router that receives the complete intent from configuration uses
// SetIntent or Apply instead, which replace the whole intent at once; the
// three write the same state, so the last call wins.
func (t *Tier) Quiesce(scope Scope, reason string) error {
	if !ValidReason(reason) {
		return ErrInvalidReason
	}
	t.mu.Lock()
	if scope.IsTier() {
		t.reason = reason
		t.refuseAllLocked(ErrTierQuiesced)
		t.mu.Unlock()
		return nil
	}
	m := t.currentLocked(scope.Member)
	if m == nil {
		t.mu.Unlock()
		return ErrUnknownMember
	}
	m.reason = reason
	t.mu.Unlock()
	// Requests waiting for a tier left with no member to admit them are
	// refused now.
	t.dispatchIfWaiting()
	return nil
}

// Readmit lets scope admit again. Readmitting the tier never clears a member's
// quiesce, and readmitting a member never readmits the tier. A Drain waiting
// on the scope returns ErrNotQuiesced. It returns ErrUnknownMember, changing
// nothing, for a member outside the tier.
func (t *Tier) Readmit(scope Scope) error {
	t.mu.Lock()
	if scope.IsTier() {
		t.readmittedLocked(t.reason)
		t.reason = ""
	} else {
		m := t.currentLocked(scope.Member)
		if m == nil {
			t.mu.Unlock()
			return ErrUnknownMember
		}
		t.readmittedLocked(m.reason)
		m.reason = ""
	}
	t.wakeLocked()
	t.mu.Unlock()
	t.dispatchIfWaiting()
	return nil
}

// readmittedLocked advances the readmission epoch when a scope quiesced for
// oldReason is about to admit again. t.mu is held.
func (t *Tier) readmittedLocked(oldReason string) {
	if oldReason != "" {
		t.epoch.Add(1)
	}
}

// SetIntent replaces the tier's whole quiesce intent atomically: the tier and
// every member named in intent.Members are quiesced with their reasons, every
// other member admits. It returns ErrInvalidReason or ErrUnknownMember,
// changing nothing, when a reason is malformed or a key is not a member.
// Apply does the same together with a reconfiguration.
func (t *Tier) SetIntent(intent Intent) error {
	in, err := intent.copyValid()
	if err != nil {
		return err
	}
	t.mu.Lock()
	if err := in.checkMembers(t.view.Load().ids); err != nil {
		t.mu.Unlock()
		return err
	}
	t.applyIntentLocked(in)
	t.mu.Unlock()
	t.dispatchIfWaiting()
	return nil
}

// intentCopy is a validated Intent detached from the caller's map, with the
// members sorted by id.
type intentCopy struct {
	tier    string
	members []memberReason
}

// memberReason is one quiesced member of an intentCopy.
type memberReason struct {
	id, reason string
}

// copyValid validates the intent's reasons and copies it.
func (intent Intent) copyValid() (intentCopy, error) {
	if intent.Tier != "" && !ValidReason(intent.Tier) {
		return intentCopy{}, ErrInvalidReason
	}
	in := intentCopy{tier: intent.Tier, members: make([]memberReason, 0, len(intent.Members))}
	for id, reason := range intent.Members {
		if !ValidReason(reason) {
			return intentCopy{}, ErrInvalidReason
		}
		in.members = append(in.members, memberReason{id: id, reason: reason})
	}
	slices.SortFunc(in.members, func(a, b memberReason) int { return strings.Compare(a.id, b.id) })
	return in, nil
}

// checkMembers returns ErrUnknownMember unless every member of the intent is
// one of the sorted ids.
func (in intentCopy) checkMembers(ids []string) error {
	for _, m := range in.members {
		if _, found := slices.BinarySearch(ids, m.id); !found {
			return fmt.Errorf("%w: quiesce intent names a member outside the tier", ErrUnknownMember)
		}
	}
	return nil
}

// applyIntentLocked sets the quiesce state of the tier and of every current
// member from a checked intent. t.mu is held.
func (t *Tier) applyIntentLocked(in intentCopy) {
	if in.tier == "" {
		t.readmittedLocked(t.reason)
	}
	t.reason = in.tier
	for _, m := range t.members {
		old := m.reason
		m.reason = ""
		if j, found := slices.BinarySearchFunc(in.members, m.id, func(r memberReason, id string) int {
			return strings.Compare(r.id, id)
		}); found {
			m.reason = in.members[j].reason
		}
		if m.reason == "" {
			t.readmittedLocked(old)
		}
	}
	if t.reason != "" {
		t.refuseAllLocked(ErrTierQuiesced)
	}
	t.wakeLocked()
}

// Drain waits until scope, which must be quiesced, holds no lease. It never
// cancels anything: it only watches releases. It returns nil once the scope's
// active count is zero; ErrNotQuiesced when the scope is not quiesced, or is
// readmitted while Drain waits; ErrUnknownMember for a member outside the
// tier; and ctx.Err() when ctx ends first. A member removed by Reconfigure
// admits nothing, so draining it is allowed and waits for its last lease.
func (t *Tier) Drain(ctx context.Context, scope Scope) error {
	t.mu.Lock()
	var m *member
	if !scope.IsTier() {
		if m = t.currentLocked(scope.Member); m == nil {
			m = t.retiredLocked(scope.Member)
		}
		if m == nil {
			t.mu.Unlock()
			return ErrUnknownMember
		}
	}
	for {
		active, quiesced := t.active, t.reason != ""
		if m != nil {
			active, quiesced = m.active, m.retired || m.reason != ""
		}
		switch {
		case !quiesced:
			t.mu.Unlock()
			return ErrNotQuiesced
		case active == 0:
			t.mu.Unlock()
			return nil
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		t.mu.Lock()
	}
}

// currentLocked returns the current member with id, or nil. t.mu is held.
func (t *Tier) currentLocked(id string) *member {
	if i, found := slices.BinarySearch(t.view.Load().ids, id); found {
		return t.members[i]
	}
	return nil
}

// retiredLocked returns the removed member with id that still holds leases,
// or nil. t.mu is held.
func (t *Tier) retiredLocked(id string) *member {
	for _, m := range t.retired {
		if m.id == id {
			return m
		}
	}
	return nil
}

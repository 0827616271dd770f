package admission

import (
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Phase is the effective admission phase of a member, as ReplicaTier status
// reports it.
type Phase string

// The closed set of Phase values.
const (
	// PhaseAdmitting means the member and its tier are not quiesced.
	PhaseAdmitting Phase = "Admitting"
	// PhaseDraining means the member or its tier is quiesced (or the member
	// was removed) and the member still holds leases.
	PhaseDraining Phase = "Draining"
	// PhaseDrained means the member or its tier is quiesced (or the member
	// was removed) and the member holds no lease.
	PhaseDrained Phase = "Drained"
)

// Snapshot is a consistent view of a tier's admission state, taken under its
// lock. It shares nothing with the tier. Active always equals the sum of the
// members' Active.
type Snapshot struct {
	// Strategy is the effective strategy: bounds.StrategyRoundRobin or
	// bounds.StrategyCapacity, or empty for a direct tier.
	Strategy bounds.Strategy
	// Active is the tier's reservation count, including leases held on
	// removed members.
	Active int
	// Ceiling is the effective tier ceiling, 0 when unbounded.
	Ceiling int
	// Quiesced is true when the tier is quiesced.
	Quiesced bool
	// Reason is the tier's quiesce reason, empty when not quiesced.
	Reason string
	// Draining is true when the tier is quiesced and still holds leases.
	Draining bool
	// Members are the current members and the removed members that still
	// hold leases, sorted by id.
	Members []MemberSnapshot
}

// MemberSnapshot is one member's admission state within a Snapshot.
type MemberSnapshot struct {
	// ID is the member id.
	ID string
	// Active is the member's reservation count.
	Active int
	// Ceiling is the member's ceiling, 0 when it has none.
	Ceiling int
	// Quiesced is true when the member itself is quiesced; tier quiesce is
	// reported on the Snapshot.
	Quiesced bool
	// Reason is the member's quiesce reason, empty when not quiesced.
	Reason string
	// Draining is true when the member is quiesced or removed and still holds
	// leases.
	Draining bool
	// Removed is true for a member no longer in the configuration that still
	// holds leases.
	Removed bool
	// Phase is the member's effective phase, counting tier quiesce and
	// removal as well as member quiesce.
	Phase Phase
}

// Snapshot returns the tier's current admission state.
func (t *Tier) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{
		Strategy: t.view.Load().strategy,
		Active:   t.active,
		Ceiling:  t.ceiling,
		Quiesced: t.reason != "",
		Reason:   t.reason,
		Draining: t.reason != "" && t.active > 0,
		Members:  make([]MemberSnapshot, 0, len(t.members)+len(t.retired)),
	}
	for _, m := range slices.Concat(t.members, t.retired) {
		stopped := m.retired || m.reason != ""
		ms := MemberSnapshot{
			ID:       m.id,
			Active:   m.active,
			Ceiling:  m.ceiling,
			Quiesced: m.reason != "",
			Reason:   m.reason,
			Draining: stopped && m.active > 0,
			Removed:  m.retired,
			Phase:    PhaseAdmitting,
		}
		if stopped || s.Quiesced {
			ms.Phase = PhaseDrained
			if m.active > 0 {
				ms.Phase = PhaseDraining
			}
		}
		s.Members = append(s.Members, ms)
	}
	slices.SortFunc(s.Members, func(a, b MemberSnapshot) int { return strings.Compare(a.ID, b.ID) })
	return s
}

package adminapi

// The judgements read off one tier's capacity view, shared by the router's
// per-tier readiness and the model-server gauges a cluster picker scrapes
// (docs/OPERATIONS.md#model-server-gauges), so both say the same thing.

// The values of TierCapacity.State and MemberCapacity.State.
const (
	// StateAdmitting is a tier or member that admits requests.
	StateAdmitting = "admitting"
	// StateQuiesced is a quiesced tier or member.
	StateQuiesced = "quiesced"
	// StateRemoved is a member no longer configured that holds leases.
	StateRemoved = "removed"
)

// Eligible reports whether the member may be given a request: it admits
// and its latest readiness probe passed.
func (m *MemberCapacity) Eligible() bool {
	return m.State == StateAdmitting && m.Ready
}

// Full reports whether the member holds as many reservations as its
// ceiling allows; a member without a ceiling is never full.
func (m *MemberCapacity) Full() bool {
	return m.MaxConcurrency != nil && m.Active >= *m.MaxConcurrency
}

// NotServing says why the tier cannot be given a request now: "tier not
// served" (removed from the configuration), "tier quiesced" or "no eligible
// member" (every member quiesced, removed or not ready). It is empty for a
// tier that serves, saturated or not.
func (t *TierCapacity) NotServing() string {
	switch {
	case t.Removed:
		return "tier not served"
	case t.State != StateAdmitting:
		return "tier quiesced"
	}
	for i := range t.Members {
		if t.Members[i].Eligible() {
			return ""
		}
	}
	return "no eligible member"
}

// Saturated reports whether a serving tier refuses the next request for
// want of room: its queue is full or, without a queue, the tier is at its
// ceiling or every eligible member is at its own. A tier with a queue
// that is not full is not saturated: the next request waits there.
func (t *TierCapacity) Saturated() bool {
	if t.NotServing() != "" {
		return false
	}
	if t.Queue.MaxRequests != nil {
		return t.Queue.Waiting >= *t.Queue.MaxRequests
	}
	if t.AtCeiling() {
		return true
	}
	for i := range t.Members {
		if m := &t.Members[i]; m.Eligible() && !m.Full() {
			return false
		}
	}
	return true
}

// AtCeiling reports whether the tier holds as many reservations as its
// effective ceiling allows; an unbounded tier never does.
func (t *TierCapacity) AtCeiling() bool {
	return t.MaxConcurrency != nil && t.Active >= *t.MaxConcurrency
}

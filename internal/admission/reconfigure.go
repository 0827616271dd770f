package admission

import (
	"slices"
	"sort"
	"strings"
)

// Reconfigure replaces the tier's configuration atomically without disturbing
// any lease. A retained member keeps its count and its quiesce; a removed
// member stops admitting at once, loses its quiesce, and keeps receiving its
// live leases' releases (it is reported by Snapshot until its count reaches
// zero; re-adding it before then resumes the same count). A lowered ceiling
// only blocks new admissions. The cursor keeps pointing at the same member
// when it is retained, and otherwise moves to the next retained member in id
// order. Tier quiesce is unchanged. A changed Queue takes effect at once:
// requests waiting beyond its new bounds leave with ErrQueueFull (all of
// them, with ErrTierFull, when the queue is removed), and the others'
// deadlines follow its MaxWait; a member the change lets admit admits
// waiting requests. An invalid cfg returns an error wrapping
// ErrInvalidConfig and changes nothing.
func (t *Tier) Reconfigure(cfg Config) error {
	p, err := cfg.validate()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.reconfigureLocked(p)
	t.mu.Unlock()
	t.dispatchIfWaiting()
	return nil
}

// Apply is Reconfigure and SetIntent in one atomic step, for a router that
// receives membership, ceilings and quiesce intent together: no request is
// admitted under the new membership with the old intent. The intent's
// members are checked against the new configuration. An invalid cfg or intent
// returns an error and changes nothing.
func (t *Tier) Apply(cfg Config, intent Intent) error {
	p, err := cfg.validate()
	if err != nil {
		return err
	}
	in, err := intent.copyValid()
	if err != nil {
		return err
	}
	if err := in.checkMembers(p.ids); err != nil {
		return err
	}
	t.mu.Lock()
	t.reconfigureLocked(p)
	t.applyIntentLocked(in)
	t.mu.Unlock()
	t.dispatchIfWaiting()
	return nil
}

// reconfigureLocked installs a validated plan. t.mu is held.
func (t *Tier) reconfigureLocked(p plan) {
	old := t.view.Load()
	members := make([]*member, len(p.members))
	for i, mc := range p.members {
		m := t.currentLocked(mc.ID)
		if m == nil {
			m = t.retiredLocked(mc.ID)
		}
		if m == nil {
			m = &member{id: mc.ID}
		}
		m.ceiling = mc.MaxConcurrency
		m.retired = false
		members[i] = m
	}
	retired := t.retired[:0:0]
	for _, m := range t.retired {
		if !m.retired {
			continue // re-added above.
		}
		retired = append(retired, m)
	}
	for i, m := range t.members {
		if _, kept := slices.BinarySearch(p.ids, old.ids[i]); kept {
			continue
		}
		m.retired = true
		m.reason = ""
		if m.active > 0 {
			retired = append(retired, m)
		}
	}
	slices.SortFunc(retired, func(a, b *member) int { return strings.Compare(a.id, b.id) })

	t.cursor = sort.SearchStrings(p.ids, old.ids[t.cursor]) % len(p.ids)
	t.members = members
	t.retired = retired
	t.ceiling = p.ceiling
	t.reconfigureQueueLocked(p.queue)
	if old.strategy != p.strategy || !slices.Equal(old.ids, p.ids) {
		t.view.Store(&membership{strategy: p.strategy, ids: p.ids})
	}
	t.wakeLocked()
}

package tierstest

import (
	"maps"
	"sync"
)

// byTier holds one value per member of each tier the test set. It is safe
// for concurrent use; the fakes that hold it take mu for their own
// changes too.
type byTier[V any] struct {
	mu    sync.Mutex
	tiers map[string]map[string]V
}

// get returns a copy of the tier's values, or ErrUnknownTier.
func (b *byTier[V]) get(tier string) (map[string]V, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.tiers[tier]
	if !ok {
		return nil, ErrUnknownTier
	}
	return maps.Clone(m), nil
}

// set replaces the tier's values with a copy of m.
func (b *byTier[V]) set(tier string, m map[string]V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tiers == nil {
		b.tiers = map[string]map[string]V{}
	}
	b.tiers[tier] = maps.Clone(m)
}

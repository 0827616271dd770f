package admission

// DrainWaiting reports whether some Drain is parked waiting for a release or
// an intent change, so tests can act after a drain is really waiting.
func DrainWaiting(t *Tier) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wake != nil
}


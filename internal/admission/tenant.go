package admission

// Bounds of a tenant's priority.
const (
	// MinPriority and MaxPriority bound Tenant.Priority; the default
	// priority is 0, so a band below every default and one above it can be
	// named.
	MinPriority = -1000
	MaxPriority = 1000
)

// Tenant is who a queued request waits for: a tenant's requests wait in its
// priority band, behind the earlier requests of the same tenant and taking
// turns with the other tenants of the band (docs/ADMISSION-QUEUE.md).
type Tenant struct {
	// Name identifies the tenant; the empty name is one tenant like any
	// other (the requests of keys without a name).
	Name string
	// Priority is the tenant's band, MinPriority..MaxPriority; a higher
	// band is always served first.
	Priority int
}

// Package adminapi holds the JSON bodies of the router's admin API
// (docs/ROUTER.md §6): the capacity view, the tiers view and a drain's
// answer, and the tiers the router has in force as status reporting reads
// them. The router fills and serves them; every client that reads them —
// the status writer, the metrics collectors, the plugin, the demo, the
// benchmark harness, the chaos soak and the end-to-end tests — decodes into
// the same types, so a field is named once; GetJSON and Post are the small
// client the programs and tests share. It imports nothing of the project.
package adminapi

// CapacityView is the body of GET /admin/v1/capacity.
type CapacityView struct {
	// Tiers are the served tiers and the removed tiers still holding
	// leases, sorted by tier.
	Tiers []TierCapacity `json:"tiers"`
}

// TierCapacity is one tier's admission state. Active always equals the sum
// of the members' Active.
type TierCapacity struct {
	// Tier is the tier's namespace/name.
	Tier string `json:"tier"`
	// Strategy is Direct, RoundRobin or Capacity.
	Strategy string `json:"strategy"`
	// ServedModel is the model id every member serves (spec.servedModel).
	ServedModel string `json:"served_model"`
	// Active is the tier's reservation count.
	Active int `json:"active"`
	// MaxConcurrency is the effective tier ceiling; null when unbounded.
	MaxConcurrency *int `json:"max_concurrency"`
	// State is "admitting" or "quiesced".
	State string `json:"state"`
	// Draining is true when the tier is quiesced and holds leases.
	Draining bool `json:"draining"`
	// Removed is true for a tier no longer configured that holds leases.
	Removed bool `json:"removed"`
	// Queue is the tier's admission queue (docs/ADMISSION-QUEUE.md).
	Queue TierQueue `json:"queue"`
	// Members are sorted by id, including removed members holding leases.
	Members []MemberCapacity `json:"members"`
}

// TierQueue is the state of one tier's admission queue.
type TierQueue struct {
	// MaxRequests is the queue's bound (spec.queue.maxRequests); absent
	// when the tier has no queue.
	MaxRequests *int `json:"max_requests,omitempty"`
	// Waiting is the number of requests waiting in the queue.
	Waiting int `json:"waiting"`
	// OldestWaitMillis is how long the longest-waiting request has waited,
	// in whole milliseconds; 0 when none waits.
	OldestWaitMillis int64 `json:"oldest_wait_ms"`
}

// MemberCapacity is one member's admission state.
type MemberCapacity struct {
	// ID is the member id.
	ID string `json:"id"`
	// Active is the member's reservation count.
	Active int `json:"active"`
	// MaxConcurrency is the member's ceiling; null when it has none.
	MaxConcurrency *int `json:"max_concurrency"`
	// State is "admitting", "quiesced" (the member itself) or "removed".
	State string `json:"state"`
	// Phase is Admitting, Draining or Drained, counting tier quiesce.
	Phase string `json:"phase"`
	// Draining is true when the member is quiesced or removed and holds
	// leases.
	Draining bool `json:"draining"`
	// Ready is the member's latest readiness.
	Ready bool `json:"ready"`
	// Pressure is the member's cached pressure, for Capacity tiers only.
	Pressure *MemberPressure `json:"pressure,omitempty"`
}

// MemberPressure is one member's cached upstream pressure, read without
// scheduling a refresh.
type MemberPressure struct {
	// Freshness is fresh, stale, failed or unknown.
	Freshness string `json:"freshness"`
	// PPM is the pressure in parts per million; null unless fresh.
	PPM *int64 `json:"pressure_ppm"`
	// RequestState is the state of the running+waiting signal.
	RequestState string `json:"requests_state"`
	// KVState is the state of the KV cache signal.
	KVState string `json:"kv_state"`
}

// TiersView is the body of GET /admin/v1/tiers.
type TiersView struct {
	// Loaded is true once a configuration was applied.
	Loaded bool `json:"loaded"`
	// Tiers are the served and the rejected tiers, sorted by tier.
	Tiers []TierView `json:"tiers"`
	// SourceErrors are the manifest files whose current content is
	// rejected; their tiers keep their last good configuration.
	SourceErrors []SourceErrorView `json:"source_errors"`
}

// TierView is one tier's configuration as applied. Member endpoints are
// left out: they are operator configuration, and the admin API never
// echoes addresses.
type TierView struct {
	// Tier is the tier's namespace/name.
	Tier string `json:"tier"`
	// File is the manifest file that declares it.
	File string `json:"file"`
	// Served is true when the router routes the tier's aliases to it.
	Served bool `json:"served"`
	// Aliases are the caller-facing model names.
	Aliases []string `json:"aliases"`
	// ServedModel is the model id every member must serve.
	ServedModel string `json:"served_model"`
	// Strategy is Direct, RoundRobin or Capacity.
	Strategy string `json:"strategy"`
	// MaxConcurrency is the configured tier ceiling; null when absent.
	MaxConcurrency *int32 `json:"max_concurrency"`
	// Members are the configured members, without endpoints.
	Members []MemberView `json:"members"`
	// ResponseHeaderTimeout is the upstream response header timeout.
	ResponseHeaderTimeout string `json:"response_header_timeout"`
	// IdleTimeout is the upstream idle timeout.
	IdleTimeout string `json:"idle_timeout"`
	// Quiesce is the applied quiesce intent.
	Quiesce QuiesceView `json:"quiesce"`
	// Rejection says why a tier is not served: AliasConflict, Duplicate,
	// NotAccepted (kube source) or MemberLimit.
	Rejection *RejectionView `json:"rejection,omitempty"`
	// SourceError is the current error of the tier's file, which keeps the
	// tier on its last good configuration.
	SourceError string `json:"source_error,omitempty"`
	// ApplyError is why the router could not apply the tier's current
	// configuration.
	ApplyError string `json:"apply_error,omitempty"`
}

// MemberView is one configured member.
type MemberView struct {
	// ID is the member id.
	ID string `json:"id"`
	// MaxConcurrency is the member ceiling; null when absent.
	MaxConcurrency *int32 `json:"max_concurrency"`
	// MetricsEngine is the member's metrics dialect; empty when it has no
	// metrics.
	MetricsEngine string `json:"metrics_engine,omitempty"`
}

// QuiesceView is a tier's quiesce intent.
type QuiesceView struct {
	// Tier is the tier's quiesce reason; empty when it admits.
	Tier string `json:"tier,omitempty"`
	// Members maps quiesced member ids to their reasons.
	Members map[string]string `json:"members,omitempty"`
}

// RejectionView says why a valid tier is not served.
type RejectionView struct {
	// Reason is AliasConflict, Duplicate, NotAccepted or MemberLimit.
	Reason string `json:"reason"`
	// Message names the winning tier or file.
	Message string `json:"message"`
}

// SourceErrorView is one rejected manifest file.
type SourceErrorView struct {
	// File is the file's base name; "." is the directory.
	File string `json:"file"`
	// Message says what is wrong, without quoting values.
	Message string `json:"message"`
}

// DrainView is the body of a successful drain.
type DrainView struct {
	// Tier is the drained tier.
	Tier string `json:"tier"`
	// Member is the drained member; empty for the whole tier.
	Member string `json:"member,omitempty"`
	// Drained is true: the scope holds no lease.
	Drained bool `json:"drained"`
}

// AppliedTier is one tier as the router applies it, for status reporting.
type AppliedTier struct {
	// Key is the tier's namespace/name.
	Key string
	// Namespace is the tier's namespace.
	Namespace string
	// Name is the tier's name.
	Name string
	// Generation is the generation of the configuration in force. It is
	// zero when no configuration of the tier is in force (its first one
	// failed to apply) and in files mode.
	Generation int64
	// Members are the member ids of the configuration in force, sorted.
	Members []string
	// ApplyError says why the tier's latest configuration was not applied;
	// empty when it was. The previous configuration, if any, stays in force.
	ApplyError string
	// FailedGeneration is the generation of the configuration that was not
	// applied; zero when ApplyError is empty and in files mode.
	FailedGeneration int64
}

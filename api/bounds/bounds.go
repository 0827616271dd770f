// Package bounds holds the bounds, grammars and closed sets of the
// ReplicaTier API that other packages rely on: the members of a tier, the
// member id grammar, the concurrency ceilings, the aliases of a tier, the
// members one router serves and the strategies. Each is defined here once; api/v1alpha1 validates against them
// (its CRD markers repeat the numbers, since markers cannot reference
// constants, and a test checks the generated CRD), and the scheduler, the
// admission owner, the pressure and readiness caches, the sources and the
// evidence parser reference them. It imports nothing.
package bounds

const (
	// MaxMembers is the largest replica tier: one host rarely carries more
	// than 16 GPUs, and the scheduler's evidence rows are bounded by it.
	MaxMembers = 16
	// MaxAliases bounds the caller-facing names of one tier.
	MaxAliases = 16
	// MinConcurrency is the lower bound of every concurrency ceiling: a
	// ceiling is a positive number of concurrent requests.
	MinConcurrency = 1
	// MaxConcurrency is the upper bound of every concurrency ceiling: far
	// above any engine's batch size, and it keeps ratio arithmetic exact.
	MaxConcurrency = 100000
	// MaxNodeMembers bounds the members of all the tiers one router serves.
	MaxNodeMembers = 256

	// MaxQueueRequests bounds the requests one tier's admission queue holds
	// (spec.queue.maxRequests): each waiter holds its request body and a
	// connection, so the bound is a bound on memory.
	MaxQueueRequests = 10000
	// MinQueueWaitMillis and MaxQueueWaitMillis bound how long a request may
	// wait in a tier's admission queue (spec.queue.maxWait), in
	// milliseconds: below 10 ms a queue cannot outlast one release, above
	// 10 minutes a client has long given up.
	MinQueueWaitMillis = 10
	// MaxQueueWaitMillis is the longest wait, 10 minutes (see above).
	MaxQueueWaitMillis = 10 * 60 * 1000

	// MemberIDPattern is the grammar of a member id: lowercase ASCII
	// letters, digits and inner dashes, at most MaxMemberIDLength bytes.
	MemberIDPattern = `^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`
	// MaxMemberIDLength is the longest member id, in bytes.
	MaxMemberIDLength = 32

	// SeriesSelectorPattern is the grammar of a named pressure series
	// (metrics.series): a Prometheus metric name, optionally followed by 1
	// to MaxSeriesMatchers equality matchers label="value", comma
	// separated, whose values are printable ASCII without a double quote or
	// backslash (so a value needs no escaping and ends at its quote).
	SeriesSelectorPattern = `^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[ !#-\[\]-~]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[ !#-\[\]-~]*"){0,3}\})?$`
	// MaxSeriesMatchers bounds the label matchers of one series selector:
	// the engines' own series need one (Triton's request_type), a few
	// more select a model or rank.
	MaxSeriesMatchers = 4
	// MaxSeriesSelectorLength is the longest series selector, in bytes.
	MaxSeriesSelectorLength = 256
)

// ValidMemberID reports whether id matches MemberIDPattern, without a
// regular expression: every id it accepts is safe in evidence, metrics
// labels and response headers.
func ValidMemberID(id string) bool {
	if len(id) == 0 || len(id) > MaxMemberIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(id)-1:
		default:
			return false
		}
	}
	return true
}

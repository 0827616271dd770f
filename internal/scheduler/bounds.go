package scheduler

import "time"

// Bounds of the scheduling contract. Every value the package accepts or
// produces stays inside them, and every bound keeps serialized evidence below
// 2^53 so that JSON consumers using float64 numbers read it exactly.
const (
	// MaxSampleAge is the oldest a successful sample may be and still rank as
	// fresh. An engine sample describes a moment; after five seconds (five
	// refresh periods of the pressure cache) it says little about the present.
	MaxSampleAge = 5 * time.Second

	// MinMembers is the smallest membership Rank accepts: with one member there
	// is nothing to rank, so a direct tier never calls it.
	MinMembers = 2
	// MaxMembers is the largest membership of a tier, the bound of the
	// ReplicaTier API. It bounds the score rows of a Decision and lets Rank
	// track membership positions in a bit set and sort on the stack.
	MaxMembers = 16

	// MaxActive is the largest reservation count a candidate may carry. It is
	// far above any real concurrency and keeps Active×Capacity below 2^53.
	MaxActive = 1_000_000_000
	// MinCapacity is the smallest member ceiling: a ceiling is a positive
	// number of concurrent requests.
	MinCapacity = 1
	// MaxCapacity is the largest member ceiling, the same bound the
	// ReplicaTier API puts on maxConcurrency.
	MaxCapacity = 100_000

	// MaxCount is the largest running or waiting request count Normalize
	// accepts from an engine; anything larger is a malformed sample.
	MaxCount = 1_000_000_000
	// PPMScale is the number of parts per million in one whole: a pressure of
	// PPMScale means the member reports exactly its capacity in use.
	PPMScale = 1_000_000
	// MaxRequestPPM is the largest request pressure: (MaxCount+MaxCount)
	// requests on a member of capacity MinCapacity. Request pressure is not
	// clamped at PPMScale, so an overloaded member stays distinguishable.
	MaxRequestPPM = 2 * MaxCount * PPMScale / MinCapacity
	// MaxKVPPM is the largest KV cache pressure: a cache that is full.
	MaxKVPPM = PPMScale

	// MaxMemberIDLength is the longest member id, the bound of the ReplicaTier
	// member id grammar ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$.
	MaxMemberIDLength = 32
)

// ValidMemberID reports whether id matches the ReplicaTier member id grammar
// ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$, which makes every id safe to put in
// evidence, metrics labels and response headers.
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

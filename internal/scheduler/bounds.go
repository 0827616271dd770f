package scheduler

import (
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
)

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

	// MaxActive is the largest reservation count a candidate may carry. It is
	// far above any real concurrency and keeps Active×Capacity below 2^53.
	MaxActive = 1_000_000_000

	// MaxCount is the largest running or waiting request count Normalize
	// accepts from an engine; anything larger is a malformed sample.
	MaxCount = 1_000_000_000
	// PPMScale is the number of parts per million in one whole: a pressure of
	// PPMScale means the member reports exactly its capacity in use.
	PPMScale = 1_000_000
	// MaxRequestPPM is the largest request pressure: (MaxCount+MaxCount)
	// requests on a member of capacity MinCapacity. Request pressure is not
	// clamped at PPMScale, so an overloaded member stays distinguishable.
	MaxRequestPPM = 2 * MaxCount * PPMScale / bounds.MinConcurrency
	// MaxKVPPM is the largest KV cache pressure: a cache that is full.
	MaxKVPPM = PPMScale
)

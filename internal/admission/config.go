package admission

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Bounds of a tier configuration and of quiesce reasons.
const (
	// MinMembers is the smallest tier: one member makes a direct tier.
	MinMembers = 1
	// MaxMembers is the largest tier, the bound scheduler.Rank accepts and the
	// ReplicaTier API enforces.
	MaxMembers = bounds.MaxMembers
	// MinConcurrency is the smallest configured ceiling: a ceiling of zero
	// would admit nothing, so zero means "absent" instead.
	MinConcurrency = 1
	// MaxConcurrency is the largest configured ceiling, the bound of the
	// ReplicaTier API's maxConcurrency fields and of scheduler capacities.
	MaxConcurrency = bounds.MaxConcurrency
	// MaxReasonLength is the longest quiesce reason, the bound of the
	// ReplicaTier reason grammar ^[a-z0-9][a-z0-9-]{0,62}$; reasons appear in
	// status and metrics, so they stay short and safe.
	MaxReasonLength = 63
)

// MemberConfig is one member of a tier.
type MemberConfig struct {
	// ID is the member id; it must match bounds.ValidMemberID and be
	// unique within the tier.
	ID string
	// MaxConcurrency is the member's ceiling, MinConcurrency..MaxConcurrency.
	// Zero means the member has no ceiling of its own; bounds.StrategyCapacity
	// requires one for every member.
	MaxConcurrency int
}

// Config is the admission configuration of one tier.
//
// Rules: 1..MaxMembers members with unique valid ids, in any order; Strategy
// must be empty for a single member (a direct tier) and empty (meaning
// bounds.StrategyRoundRobin), bounds.StrategyRoundRobin or
// bounds.StrategyCapacity otherwise; bounds.StrategyCapacity requires every
// member's MaxConcurrency; every non-zero ceiling is within
// MinConcurrency..MaxConcurrency.
//
// The tier ceiling is MaxConcurrency when set; otherwise the sum of the member
// ceilings when every member has one; otherwise the tier is unbounded. A
// direct tier follows the same rule: its tier ceiling if set, else its
// member's ceiling, else unbounded. Member ceilings are enforced under every
// strategy.
type Config struct {
	// Strategy is the selection strategy; the zero value is described above.
	Strategy bounds.Strategy
	// MaxConcurrency is the aggregate tier ceiling, never multiplied by the
	// member count. Zero means absent.
	MaxConcurrency int
	// Members are the tier's members.
	Members []MemberConfig
	// Queue is the tier's admission queue; nil means none: a request the
	// tier cannot admit is refused at once.
	Queue *Queue
}

// Bounds of an admission queue, the bounds of the ReplicaTier API's
// spec.queue.
const (
	// MaxQueueRequests is the largest Queue.MaxRequests.
	MaxQueueRequests = bounds.MaxQueueRequests
	// MinQueueWait and MaxQueueWait bound Queue.MaxWait.
	MinQueueWait = bounds.MinQueueWaitMillis * time.Millisecond
	MaxQueueWait = bounds.MaxQueueWaitMillis * time.Millisecond
)

// Queue is the admission queue of a tier (docs/ADMISSION-QUEUE.md): a request
// the tier is too full to admit waits, holding no reservation, until a member
// can admit it, its wait passes MaxWait or its client leaves.
//
// Rules: MaxRequests is 1..MaxQueueRequests; MaxWait is
// MinQueueWait..MaxQueueWait; MaxRequestsPerTenant is 0 (no share of its
// own) or 1..MaxRequests.
type Queue struct {
	// MaxRequests bounds the requests waiting in the tier, all tenants
	// together.
	MaxRequests int
	// MaxWait bounds how long one request waits.
	MaxWait time.Duration
	// MaxRequestsPerTenant bounds the requests of one tenant waiting in the
	// tier; zero means MaxRequests.
	MaxRequestsPerTenant int
}

// validate checks q against the rules of Queue.
func (q *Queue) validate() error {
	switch {
	case q.MaxRequests < 1 || q.MaxRequests > MaxQueueRequests:
		return fmt.Errorf("%w: queue maxRequests %d outside 1..%d", ErrInvalidConfig, q.MaxRequests, MaxQueueRequests)
	case q.MaxWait < MinQueueWait || q.MaxWait > MaxQueueWait:
		return fmt.Errorf("%w: queue maxWait %v outside %v..%v", ErrInvalidConfig, q.MaxWait, MinQueueWait, MaxQueueWait)
	case q.MaxRequestsPerTenant < 0 || q.MaxRequestsPerTenant > q.MaxRequests:
		return fmt.Errorf("%w: queue maxRequestsPerTenant %d outside 0..maxRequests (%d)", ErrInvalidConfig, q.MaxRequestsPerTenant, q.MaxRequests)
	}
	return nil
}

// plan is a validated Config: members sorted by id, effective strategy and
// effective tier ceiling. It shares nothing with the caller's Config.
type plan struct {
	strategy bounds.Strategy // empty for a direct tier.
	ceiling  int             // 0 = unbounded.
	members  []MemberConfig
	ids      []string
	queue    Queue // zero MaxRequests: no queue.
}

// validate checks cfg against the rules of Config and returns its plan.
func (cfg Config) validate() (plan, error) {
	n := len(cfg.Members)
	if n < MinMembers || n > MaxMembers {
		return plan{}, fmt.Errorf("%w: %d members, want %d..%d", ErrInvalidConfig, n, MinMembers, MaxMembers)
	}
	p := plan{strategy: cfg.Strategy, members: slices.Clone(cfg.Members)}
	if q := cfg.Queue; q != nil {
		if err := q.validate(); err != nil {
			return plan{}, err
		}
		p.queue = *q
		if p.queue.MaxRequestsPerTenant == 0 {
			p.queue.MaxRequestsPerTenant = q.MaxRequests
		}
	}
	switch {
	case n == 1 && p.strategy != "":
		return plan{}, fmt.Errorf("%w: a strategy is forbidden on a direct tier", ErrInvalidConfig)
	case n > 1 && p.strategy == "":
		p.strategy = bounds.StrategyRoundRobin
	case n > 1 && !slices.Contains(bounds.Strategies(), p.strategy):
		return plan{}, fmt.Errorf("%w: unknown strategy", ErrInvalidConfig)
	}
	if !ceilingValid(cfg.MaxConcurrency) {
		return plan{}, fmt.Errorf("%w: tier maxConcurrency outside %d..%d", ErrInvalidConfig, MinConcurrency, MaxConcurrency)
	}
	slices.SortFunc(p.members, func(a, b MemberConfig) int { return strings.Compare(a.ID, b.ID) })
	sum, bounded := 0, true
	p.ids = make([]string, n)
	for i, m := range p.members {
		switch {
		case !bounds.ValidMemberID(m.ID):
			return plan{}, fmt.Errorf("%w: member %d has an invalid id", ErrInvalidConfig, i)
		case i > 0 && p.members[i-1].ID == m.ID:
			return plan{}, fmt.Errorf("%w: duplicate member id %q", ErrInvalidConfig, m.ID)
		case !ceilingValid(m.MaxConcurrency):
			return plan{}, fmt.Errorf("%w: member %q maxConcurrency outside %d..%d", ErrInvalidConfig, m.ID, MinConcurrency, MaxConcurrency)
		case m.MaxConcurrency == 0 && p.strategy == bounds.StrategyCapacity:
			return plan{}, fmt.Errorf("%w: member %q needs maxConcurrency under the Capacity strategy", ErrInvalidConfig, m.ID)
		}
		p.ids[i] = m.ID
		sum += m.MaxConcurrency
		bounded = bounded && m.MaxConcurrency > 0
	}
	switch {
	case cfg.MaxConcurrency > 0:
		p.ceiling = cfg.MaxConcurrency
	case bounded:
		p.ceiling = sum
	}
	return p, nil
}

// ceilingValid reports whether c is an absent (zero) or in-bounds ceiling.
func ceilingValid(c int) bool {
	return c == 0 || (c >= MinConcurrency && c <= MaxConcurrency)
}

// Scope names what a quiesce, readmit or drain applies to: the whole tier, or
// one member.
type Scope struct {
	// Member is the member id, or empty for the tier.
	Member string
}

// TierScope returns the scope of the whole tier.
func TierScope() Scope { return Scope{} }

// MemberScope returns the scope of the member id.
func MemberScope(id string) Scope { return Scope{Member: id} }

// IsTier reports whether s names the whole tier.
func (s Scope) IsTier() bool { return s.Member == "" }

// Intent is the complete quiesce intent of a tier, as the ReplicaTier carries
// it: the tier's reason and one reason per quiesced member. An empty reason
// (or an absent member) means admitting.
type Intent struct {
	// Tier is the tier's quiesce reason; empty means the tier admits.
	Tier string
	// Members maps a quiesced member's id to its reason. Members not in the
	// map admit.
	Members map[string]string
}

// ValidReason reports whether reason matches ^[a-z0-9][a-z0-9-]{0,62}$, the
// grammar of a quiesce reason.
func ValidReason(reason string) bool {
	if len(reason) == 0 || len(reason) > MaxReasonLength {
		return false
	}
	for i := 0; i < len(reason); i++ {
		c := reason[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

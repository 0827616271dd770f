package bounds

// Strategy is how a replica tier (two or more members) picks a member. It
// is the one strategy type from the API down: api/v1alpha1's Strategy is
// this type, and the admission owner runs it. A direct tier (one member)
// runs none: its strategy is the empty Strategy, and the views name it by
// the tier's kind.
type Strategy string

const (
	// StrategyRoundRobin rotates over the eligible members. It is what a
	// replica tier without a strategy runs.
	StrategyRoundRobin Strategy = "RoundRobin"
	// StrategyCapacity ranks the eligible members with scheduler.Rank by
	// router reservations, then fresh engine pressure, then rotation. Every
	// member needs a ceiling, and only this strategy reads engine pressure.
	StrategyCapacity Strategy = "Capacity"
)

// Strategies returns every strategy, in the order the CRD's enum lists
// them. The slice is new and owned by the caller.
func Strategies() []Strategy {
	return []Strategy{StrategyRoundRobin, StrategyCapacity}
}

// UsesPressure reports whether the strategy ranks the eligible members by
// engine pressure, so that a tier running it reads the pressure cache,
// registers its members' metrics and shows their pressure: true for
// StrategyCapacity only, false for every other strategy and for a direct
// tier's empty Strategy.
func (s Strategy) UsesPressure() bool {
	return s == StrategyCapacity
}

// StrategyName names what a tier runs, as the router's admin API and the
// status the plugin prints show it: the strategy, or "Direct" for a direct
// tier, whose strategy is the empty Strategy (api/v1alpha1's
// ReplicaTierSpec.EffectiveStrategy derives it from the tier's one member).
func StrategyName(s Strategy) string {
	if s == "" {
		return "Direct"
	}
	return string(s)
}

package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// Cluster-level faults, as counted in the report.
const (
	chaosKill          = "engine_kill"
	chaosCeilingUp     = "ceiling_up"
	chaosCeilingDown   = "ceiling_down"
	chaosMemberAdd     = "member_add"
	chaosMemberRemove  = "member_remove"
	chaosStrategy      = "strategy_change"
	chaosQuiesceMember = "quiesce_member"
	chaosQuiesceTier   = "quiesce_tier"
	chaosDrainMember   = "drain_member"
	chaosDrainTier     = "drain_tier"
	chaosQueueOn       = "queue_on"
	chaosQueueOff      = "queue_off"
)

// Member ceilings the soak moves between. Four members at the base ceiling
// take 16 requests at once, below the driver's 24 workers, so that members
// run at their ceilings and the overshoot check has something to check.
const (
	minCeiling  = 2
	baseCeiling = 4
	maxCeiling  = 6
	// minMembers is the fewest members the soak leaves in the tier.
	minMembers = 2
)

// cluster is what chaos acts on: the stack, or a fake in tests.
type cluster interface {
	// apply writes a configuration and returns once the router applied it.
	apply(ctx context.Context, c tierConfig) error
	// kill SIGKILLs a member's engine and returns when the signal was sent.
	kill(id string) (time.Time, error)
	// restart starts a killed member's engine on its port.
	restart(ctx context.Context, id string) error
	// drain calls the admin drain endpoint for a member, or the tier when
	// member is empty, and returns the status.
	drain(ctx context.Context, member string) (int, error)
}

// chaos injects the cluster-level faults, one at a time, until its context
// ends. It alone writes the tier's configuration while it runs.
type chaos struct {
	s        cluster
	cfg      tierConfig
	all      []string // every member id, in order
	rng      *rand.Rand
	pause    time.Duration
	downtime time.Duration

	faults map[string]int
	drains map[string]int
	kills  []killEvent
}

// run cycles through the faults until ctx ends; it returns an error only
// when the stack itself fails (an engine does not restart, a manifest is not
// applied).
func (c *chaos) run(ctx context.Context) error {
	steps := []func(context.Context) error{
		c.kill, c.ceiling, c.quiesceMember, c.membership, c.queue,
		c.kill, c.ceiling, c.quiesceTier, c.strategy, c.queue,
	}
	timer := time.NewTimer(c.pause)
	defer timer.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if err := steps[i%len(steps)](ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		timer.Reset(c.pause)
	}
}

// apply applies a new configuration and counts the fault.
func (c *chaos) apply(ctx context.Context, next tierConfig, fault string) error {
	if err := c.s.apply(ctx, next); err != nil {
		return err
	}
	c.cfg = next
	c.faults[fault]++
	return nil
}

// member picks one current member.
func (c *chaos) member() string {
	ids := c.cfg.memberIDs()
	return ids[c.rng.IntN(len(ids))]
}

// kill SIGKILLs a member's engine and restarts it on its port after the
// downtime.
func (c *chaos) kill(ctx context.Context) error {
	id := c.member()
	at, err := c.s.kill(id)
	if err != nil {
		return err
	}
	c.faults[chaosKill]++
	timer := time.NewTimer(c.downtime)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	// Restart even when the run is over: the end checks need every engine.
	if err := c.s.restart(context.WithoutCancel(ctx), id); err != nil {
		return fmt.Errorf("restart %s: %w", id, err)
	}
	c.kills = append(c.kills, killEvent{Member: id, Strategy: c.cfg.Strategy, At: at.UnixNano(), Restarted: time.Now().UnixNano()})
	return nil
}

// ceiling moves one member's ceiling to another value.
func (c *chaos) ceiling(ctx context.Context) error {
	next := c.cfg.clone()
	i := c.rng.IntN(len(next.Members))
	old := next.Members[i].Ceiling
	for next.Members[i].Ceiling == old {
		next.Members[i].Ceiling = minCeiling + c.rng.IntN(maxCeiling-minCeiling+1)
	}
	fault := chaosCeilingUp
	if next.Members[i].Ceiling < old {
		fault = chaosCeilingDown
	}
	return c.apply(ctx, next, fault)
}

// membership removes a member when all are in the tier (and more than
// minMembers), and otherwise adds the missing ones back at the base
// ceiling.
func (c *chaos) membership(ctx context.Context) error {
	next := c.cfg.clone()
	if len(next.Members) == len(c.all) && len(next.Members) > minMembers {
		i := c.rng.IntN(len(next.Members))
		next.Members = slices.Delete(next.Members, i, i+1)
		return c.apply(ctx, next, chaosMemberRemove)
	}
	added := false
	for _, id := range c.all {
		if next.ceiling(id) == 0 {
			next.Members = append(next.Members, memberConfig{ID: id, Ceiling: baseCeiling})
			added = true
		}
	}
	if !added {
		return nil // too few members to remove one, none to add.
	}
	return c.apply(ctx, next, chaosMemberAdd)
}

// strategy switches between RoundRobin and Capacity.
func (c *chaos) strategy(ctx context.Context) error {
	next := c.cfg.clone()
	next.Strategy = string(sluicev1.StrategyCapacity)
	if c.cfg.Strategy == string(sluicev1.StrategyCapacity) {
		next.Strategy = string(sluicev1.StrategyRoundRobin)
	}
	return c.apply(ctx, next, chaosStrategy)
}

// queue gives the tier its admission queue, or takes it away: requests wait
// in it, or are refused at once, and a removal refuses those waiting.
func (c *chaos) queue(ctx context.Context) error {
	next := c.cfg.clone()
	next.Queue = !c.cfg.Queue
	fault := chaosQueueOn
	if !next.Queue {
		fault = chaosQueueOff
	}
	return c.apply(ctx, next, fault)
}

// quiesceMember quiesces one member, waits for its drain through the admin
// API, and readmits it.
func (c *chaos) quiesceMember(ctx context.Context) error {
	id := c.member()
	next := c.cfg.clone()
	next.QuiesceMembers = map[string]bool{id: true}
	if err := c.apply(ctx, next, chaosQuiesceMember); err != nil {
		return err
	}
	c.drain(ctx, id, chaosDrainMember)
	readmit := c.cfg.clone()
	readmit.QuiesceMembers = nil
	if err := c.s.apply(context.WithoutCancel(ctx), readmit); err != nil {
		return err
	}
	c.cfg = readmit
	return nil
}

// quiesceTier quiesces the tier, waits for its drain, and readmits it.
func (c *chaos) quiesceTier(ctx context.Context) error {
	next := c.cfg.clone()
	next.QuiesceTier = true
	if err := c.apply(ctx, next, chaosQuiesceTier); err != nil {
		return err
	}
	c.drain(ctx, "", chaosDrainTier)
	readmit := c.cfg.clone()
	readmit.QuiesceTier = false
	if err := c.s.apply(context.WithoutCancel(ctx), readmit); err != nil {
		return err
	}
	c.cfg = readmit
	return nil
}

// drain waits for a quiesced scope to drain and counts the result: ok,
// or the status (or error) otherwise.
func (c *chaos) drain(ctx context.Context, member, fault string) {
	status, err := c.s.drain(context.WithoutCancel(ctx), member)
	c.faults[fault]++
	switch {
	case err != nil:
		c.drains["error"]++
	case status == http.StatusOK:
		c.drains["ok"]++
	default:
		c.drains[fmt.Sprintf("status_%d", status)]++
	}
}

// faultCounts merges the chaos counts with the per-request faults that were
// injected: an engine fault when an engine logged the request (it received
// the fault header), a client disconnect when the client did disconnect
// mid-stream. A refused request injected nothing.
func faultCounts(chaos map[string]int, records []requestRecord, logged map[string]bool) map[string]int {
	out := maps.Clone(chaos)
	if out == nil {
		out = map[string]int{}
	}
	for _, r := range records {
		switch {
		case r.Fault == faultClientDisconnect:
			if r.Outcome == outcomeClientDisconnect {
				out[r.Fault]++
			}
		case r.Fault != "" && logged[r.ID]:
			out[r.Fault]++
		}
	}
	return out
}

package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// fakeCluster records what chaos does to it.
type fakeCluster struct {
	applied  []tierConfig
	killed   []string
	restarts []string
	drains   []string
	status   int
	failKill bool
}

func (f *fakeCluster) apply(_ context.Context, c tierConfig) error {
	f.applied = append(f.applied, c.clone())
	return nil
}

var errFake = errors.New("fake failure")

func (f *fakeCluster) kill(id string) (time.Time, error) {
	if f.failKill {
		return time.Time{}, errFake
	}
	f.killed = append(f.killed, id)
	return time.Unix(0, ms(1000)), nil
}

func (f *fakeCluster) restart(_ context.Context, id string) error {
	f.restarts = append(f.restarts, id)
	return nil
}

func (f *fakeCluster) drain(_ context.Context, member string) (int, error) {
	f.drains = append(f.drains, member)
	return f.status, nil
}

func newChaos(f *fakeCluster) *chaos {
	cfg := tierConfig{Strategy: "RoundRobin"}
	all := []string{"gpu0", "gpu1", "gpu2"}
	for _, id := range all {
		cfg.Members = append(cfg.Members, memberConfig{ID: id, Ceiling: baseCeiling})
	}
	return &chaos{s: f, cfg: cfg, all: all, rng: rand.New(rand.NewPCG(1, 2)), //nolint:gosec // a test's draws.
		faults: map[string]int{}, drains: map[string]int{}}
}

func TestChaosSteps(t *testing.T) {
	ctx := context.Background()
	f := &fakeCluster{status: http.StatusOK}
	c := newChaos(f)

	if err := c.kill(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.killed) != 1 || len(f.restarts) != 1 || f.killed[0] != f.restarts[0] || len(c.kills) != 1 ||
		c.kills[0].Member != f.killed[0] || c.faults[chaosKill] != 1 {
		t.Fatalf("kill: killed %v restarted %v events %v", f.killed, f.restarts, c.kills)
	}

	for range 20 {
		before := c.cfg.clone()
		if err := c.ceiling(ctx); err != nil {
			t.Fatal(err)
		}
		changed := 0
		for i, m := range c.cfg.Members {
			if m.Ceiling != before.Members[i].Ceiling {
				changed++
				if m.Ceiling < minCeiling || m.Ceiling > maxCeiling {
					t.Fatalf("ceiling %d out of range", m.Ceiling)
				}
			}
		}
		if changed != 1 {
			t.Fatalf("a ceiling step changed %d ceilings", changed)
		}
	}
	if c.faults[chaosCeilingUp]+c.faults[chaosCeilingDown] != 20 || c.faults[chaosCeilingUp] == 0 || c.faults[chaosCeilingDown] == 0 {
		t.Fatalf("ceiling counts %v", c.faults)
	}

	if err := c.membership(ctx); err != nil || len(c.cfg.Members) != 2 || c.faults[chaosMemberRemove] != 1 {
		t.Fatalf("remove: %v, members %v", err, c.cfg.Members)
	}
	if err := c.membership(ctx); err != nil || len(c.cfg.Members) != 3 || c.faults[chaosMemberAdd] != 1 {
		t.Fatalf("add back: %v, members %v", err, c.cfg.Members)
	}

	if err := c.strategy(ctx); err != nil || c.cfg.Strategy != "Capacity" {
		t.Fatalf("strategy: %v %s", err, c.cfg.Strategy)
	}

	if err := c.queue(ctx); err != nil || !c.cfg.Queue || !f.applied[len(f.applied)-1].Queue || c.faults[chaosQueueOn] != 1 {
		t.Fatalf("queue on: %v, config %+v, faults %v", err, c.cfg, c.faults)
	}
	if err := c.queue(ctx); err != nil || c.cfg.Queue || f.applied[len(f.applied)-1].Queue || c.faults[chaosQueueOff] != 1 {
		t.Fatalf("queue off: %v, config %+v, faults %v", err, c.cfg, c.faults)
	}

	n := len(f.applied)
	if err := c.quiesceMember(ctx); err != nil {
		t.Fatal(err)
	}
	quiesced, readmitted := f.applied[n], f.applied[n+1]
	if len(quiesced.QuiesceMembers) != 1 || len(readmitted.QuiesceMembers) != 0 || len(c.cfg.QuiesceMembers) != 0 {
		t.Fatalf("member quiesce wrote %+v then %+v; now %+v", quiesced, readmitted, c.cfg)
	}
	if len(f.drains) != 1 || f.drains[0] == "" || !quiesced.QuiesceMembers[f.drains[0]] {
		t.Fatalf("drained %v while %v was quiesced", f.drains, quiesced.QuiesceMembers)
	}

	f.status = http.StatusGatewayTimeout
	if err := c.quiesceTier(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.applied[n+2].QuiesceTier || f.applied[n+3].QuiesceTier || c.cfg.QuiesceTier || f.drains[1] != "" {
		t.Fatalf("tier quiesce wrote %+v then %+v, drained %q", f.applied[n+2], f.applied[n+3], f.drains[1])
	}
	if c.drains["ok"] != 1 || c.drains["status_504"] != 1 || c.faults[chaosDrainMember] != 1 || c.faults[chaosDrainTier] != 1 {
		t.Fatalf("drains %v faults %v", c.drains, c.faults)
	}
}

func TestChaosMembershipKeepsMinimum(t *testing.T) {
	f := &fakeCluster{}
	c := newChaos(f)
	c.all = c.all[:minMembers]
	c.cfg.Members = c.cfg.Members[:minMembers]
	if err := c.membership(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(c.cfg.Members) != minMembers || len(f.applied) != 0 || len(c.faults) != 0 {
		t.Fatalf("membership below the minimum changed %v, applied %v, counted %v", c.cfg.Members, f.applied, c.faults)
	}
}

func TestChaosRunStopsAndReportsFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newChaos(&fakeCluster{}).run(ctx); err != nil {
		t.Fatalf("a cancelled run returned %v", err)
	}
	c := newChaos(&fakeCluster{failKill: true})
	if err := c.run(context.Background()); !errors.Is(err, errFake) {
		t.Fatalf("a failing kill returned %v", err)
	}
}

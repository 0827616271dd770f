package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
)

// Bounds of the demo's polling and HTTP calls.
const (
	// readyTimeout bounds the wait for every member to be ready (probes
	// run every 2 s) and for the Capacity tier's pressure to be fresh
	// (sampled 1 s apart once requests flow).
	readyTimeout = 30 * time.Second
	// idleTimeout bounds the wait for the engines and the router to return
	// to zero requests after a phase: the slowest queued request of an
	// overloaded member finishes well within it.
	idleTimeout = 60 * time.Second
	// httpTimeout bounds one admin or debug call.
	httpTimeout = 5 * time.Second
	// maxAdminBody bounds an admin or debug response the demo reads.
	maxAdminBody = 1 << 20
)

// demoTiers are the two tiers of config/samples/demo.
type demoTiers struct {
	roundRobin, capacity *sluicev1.ReplicaTier
	members              []string // the shared member ids, sorted
}

// loadTiers reads the demo's manifests (one ReplicaTier per *.yaml file),
// validates them and checks the demo's assumptions: one RoundRobin and one
// Capacity tier on one node, over the same members with ceilings, serving
// one model.
func loadTiers(dir string) (demoTiers, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return demoTiers{}, fmt.Errorf("no manifests in %s", dir)
	}
	var dt demoTiers
	for _, f := range files {
		raw, err := os.ReadFile(f) //nolint:gosec // the demo reads the repository's sample manifests.
		if err != nil {
			return demoTiers{}, err
		}
		t := &sluicev1.ReplicaTier{}
		if err := yaml.UnmarshalStrict(raw, t); err != nil {
			return demoTiers{}, fmt.Errorf("%s: %w", f, err)
		}
		if errs := sluicev1.Validate(t); len(errs) > 0 {
			return demoTiers{}, fmt.Errorf("%s: %w", f, errs.ToAggregate())
		}
		switch t.Spec.Strategy {
		case sluicev1.StrategyRoundRobin:
			dt.roundRobin = t
		case sluicev1.StrategyCapacity:
			dt.capacity = t
		default:
			return demoTiers{}, fmt.Errorf("%s: the demo needs strategy RoundRobin or Capacity", f)
		}
	}
	if dt.roundRobin == nil || dt.capacity == nil {
		return demoTiers{}, fmt.Errorf("%s must hold one RoundRobin and one Capacity tier", dir)
	}
	rr, c := dt.roundRobin.Spec, dt.capacity.Spec
	if rr.NodeName != c.NodeName || rr.ServedModel != c.ServedModel {
		return demoTiers{}, errors.New("the demo tiers must share nodeName and servedModel")
	}
	ids := func(s sluicev1.ReplicaTierSpec) []string {
		var out []string
		for _, m := range s.Members {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	dt.members = ids(c)
	if !slices.Equal(ids(rr), dt.members) {
		return demoTiers{}, errors.New("the demo tiers must have the same members")
	}
	for _, t := range []*sluicev1.ReplicaTier{dt.roundRobin, dt.capacity} {
		for _, m := range t.Spec.Members {
			if m.MaxConcurrency == nil {
				return demoTiers{}, fmt.Errorf("tier %s member %s: the demo checks ceilings, so every member needs maxConcurrency", t.Name, m.ID)
			}
		}
	}
	return dt, nil
}

// ceilings returns the member ceilings of a tier.
func ceilings(t *sluicev1.ReplicaTier) map[string]int {
	out := map[string]int{}
	for _, m := range t.Spec.Members {
		out[m.ID] = int(*m.MaxConcurrency)
	}
	return out
}

// tierKey is the tier's namespace/name, as the router names it.
func tierKey(t *sluicev1.ReplicaTier) string {
	ns := t.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + t.Name
}

// writeTiers writes copies of the tiers to dir with every member endpoint
// replaced by the address of the engine started for it.
func writeTiers(dir string, addrs map[string]string, tiers ...*sluicev1.ReplicaTier) error {
	for _, t := range tiers {
		c := t.DeepCopy()
		for i := range c.Spec.Members {
			addr, ok := addrs[c.Spec.Members[i].ID]
			if !ok {
				return fmt.Errorf("no engine for member %s", c.Spec.Members[i].ID)
			}
			c.Spec.Members[i].Endpoint = "http://" + addr
		}
		raw, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, c.Name+".yaml"), raw, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// httpClient is the demo's client for admin and debug calls: no proxy, a
// short timeout.
var httpClient = &http.Client{
	Timeout:   httpTimeout,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
}

// getJSON GETs an admin or debug url and decodes the JSON body into v.
func getJSON(ctx context.Context, url string, v any) error {
	return adminapi.GetJSON(ctx, httpClient, url, maxAdminBody, v)
}

// engineFlags are the enginesim command-line flags of one member. Like a
// vLLM engine, it serves only the tiers' servedModel; callers name the
// tiers' aliases, which the router replaces.
func engineFlags(o *options, model string, hidden int) []string {
	return []string{
		"--listen", "127.0.0.1:0",
		"--model", model,
		"--max-num-seqs", strconv.Itoa(o.maxNumSeqs),
		"--hidden-load", strconv.Itoa(hidden),
		"--ttft-base", o.ttftBase.String(),
		"--ttft-per-seq", o.ttftPerSeq.String(),
		"--itl-base", o.itlBase.String(),
		"--itl-per-seq", o.itlPerSeq.String(),
		"--output-tokens", strconv.Itoa(o.maxTokens),
	}
}

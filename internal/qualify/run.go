package qualify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/loadgen"
	"github.com/sluice-dev/sluice/internal/memberhttp"
	"github.com/sluice-dev/sluice/internal/transition"
)

// Execution bounds.
const (
	// restoreTimeout bounds restoring the quiesce intent, which runs even
	// when the run's context ended (an interrupt).
	restoreTimeout = 30 * time.Second
	// requestTimeoutFactor times the phase length bounds each request, so
	// a stuck stream fails the phase instead of holding it forever.
	requestTimeoutFactor = 2
	// memberHeader is the router's response header naming the member.
	memberHeader = "X-Sluice-Member"
	// summaryPath is the router's decision summary on its admin listener.
	summaryPath = "/admin/v1/decisions/summary"
)

// Execute runs the plan: identity and provenance, the direct, routed and
// sustained phases with the drain, the restore, then the report. Every
// check it could not pass is in the report's verdict; the error is for what
// kept it from reporting at all (the tier vanished, the output directory
// cannot be written). The quiesce intent it changed is restored before it
// returns, also when ctx ends early.
func (p *Plan) Execute(ctx context.Context) (rep *Report, err error) {
	o := p.opts
	clk := clock.RealClock{}
	rep = &Report{
		Tier: p.Tier, Generation: p.Generation, Node: p.Node, Alias: p.Alias, ServedModel: p.ServedModel,
		Strategy: p.Strategy, Provenance: maps.Clone(p.Provenance), Members: p.Members, StartedAt: clk.Now().UTC(),
	}

	// 1 and 2. Identity and provenance, before any load.
	ids := p.identify(ctx)
	rep.Identities = ids
	rep.Evidence = evidence(ids)
	rep.Checks = append(rep.Checks, identityCheck(ids, p.ServedModel), provenanceCheck(p.Provenance, ids))
	if !rep.Checks[0].Pass {
		rep.Checks = append(rep.Checks, fail("load", "not run: a member does not serve the model, so no load was sent"))
		return rep, p.finish(ctx, rep)
	}

	// 3. The direct and the routed phase: the same requests, the same
	// concurrency.
	direct, err := p.directPhase(ctx)
	if err != nil {
		return nil, err
	}
	routed, err := p.routedPhase(ctx, "routed", o.Duration, p.Concurrency)
	if err != nil {
		return nil, err
	}
	rep.Phases = append(rep.Phases, direct, routed)
	rep.Checks = append(rep.Checks, zeroFailures("direct", direct), zeroFailures("routed", routed))

	// 4. The sustained phase, with one member quiesced, drained and
	// readmitted through the transition path.
	tc := &transition.Client{Client: o.Client, Namespace: o.Namespace}
	defer func() {
		// Restore even when ctx ended: a fresh context, bounded.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		rep.Checks = append(rep.Checks, p.restore(rctx, tc, rep))
		if ctx.Err() != nil {
			rep.Checks = append(rep.Checks, fail("complete", "interrupted before the end of the run"))
		}
		if ferr := p.finish(rctx, rep); err == nil {
			err = ferr
		}
	}()
	sustained, drain := p.sustainedPhase(ctx, tc, rep)
	rep.Phases = append(rep.Phases, sustained)
	rep.Checks = append(rep.Checks, drain, zeroFailures("sustained", sustained))
	return rep, ctx.Err()
}

// directPhase sends the phase's requests straight to the members, each at
// its share of the concurrency, at once.
func (p *Plan) directPhase(ctx context.Context) (Phase, error) {
	var (
		mu      sync.Mutex
		results = map[string]*loadgen.Result{}
		errs    []error
		wg      sync.WaitGroup
	)
	for _, m := range p.Members {
		if m.Direct == 0 {
			continue
		}
		wg.Go(func() {
			res, err := loadgen.Run(ctx, p.load(m.Endpoint+"/v1", p.ServedModel, m.Direct, p.opts.Duration))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("direct load of member %s: %w", m.ID, err))
				return
			}
			results[m.ID] = res
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Phase{}, err
	}
	return newPhase("direct", "members", p.Concurrency, p.opts.Duration, results), nil
}

// routedPhase sends the phase's requests through the router.
func (p *Plan) routedPhase(ctx context.Context, name string, d time.Duration, concurrency int) (Phase, error) {
	res, err := loadgen.Run(ctx, p.load(p.opts.RouterURL+"/v1", p.Alias, concurrency, d))
	if err != nil {
		return Phase{}, fmt.Errorf("%s load: %w", name, err)
	}
	return newPhase(name, "router", concurrency, d, map[string]*loadgen.Result{"": res}), nil
}

// load is the one request mix every phase sends.
func (p *Plan) load(baseURL, model string, concurrency int, d time.Duration) loadgen.Config {
	return loadgen.Config{
		BaseURL: baseURL, APIKey: p.opts.APIKey, Model: model, API: loadgen.ChatCompletions, IncludeUsage: true,
		MaxTokens: p.opts.MaxTokens, Mode: loadgen.ClosedLoop, Concurrency: concurrency, Duration: d,
		RequestTimeout: requestTimeoutFactor * max(d, time.Minute), CountHeader: memberHeader,
	}
}

// sustainedPhase runs routed load for Sustain while, after a quarter of
// it, the drain member is quiesced, waited for until Drained and
// readmitted. The check passes when the member reached Drained and was
// readmitted.
func (p *Plan) sustainedPhase(ctx context.Context, tc *transition.Client, rep *Report) (Phase, Check) {
	o := p.opts
	start := time.Now()
	mark := func(action, result string) {
		rep.Transitions = append(rep.Transitions, Transition{
			AtSeconds: time.Since(start).Seconds(), Action: action, Member: p.DrainMember, Result: result})
	}
	type outcome struct {
		phase Phase
		err   error
	}
	loaded := make(chan outcome, 1)
	go func() {
		ph, err := p.routedPhase(ctx, "sustained", o.Sustain, p.SustainConcurrency)
		loaded <- outcome{ph, err}
	}()

	check := func() Check {
		select {
		case <-time.After(o.Sustain / 4):
		case <-ctx.Done():
			return fail("drain", "interrupted before the quiesce")
		}
		_, msg, err := tc.Quiesce(ctx, nameOf(p.Tier), p.DrainMember, DrainReason)
		if err != nil {
			mark("quiesce", "failed: "+err.Error())
			return fail("drain", "quiesce of %s failed: %v", p.DrainMember, err)
		}
		mark("quiesce", msg)
		dctx, cancel := context.WithTimeout(ctx, o.DrainTimeout)
		_, msg, err = tc.Drain(dctx, nameOf(p.Tier), p.DrainMember, o.DrainTimeout)
		cancel()
		if err != nil {
			mark("drain", "failed: "+err.Error())
			return fail("drain", "%s did not reach Drained: %v", p.DrainMember, err)
		}
		mark("drain", msg)
		_, msg, err = tc.Readmit(ctx, nameOf(p.Tier), p.DrainMember)
		if err != nil {
			mark("readmit", "failed: "+err.Error())
			return fail("drain", "readmit of %s failed: %v", p.DrainMember, err)
		}
		mark("readmit", msg)
		return pass("drain", "%s quiesced, Drained and readmitted while routed load ran", p.DrainMember)
	}()
	out := <-loaded
	if out.err != nil {
		return Phase{Name: "sustained", Error: out.err.Error()}, check
	}
	return out.phase, check
}

// restore puts the quiesce intent the run changed back as it was found,
// then checks the tier's whole intent equals what was found.
func (p *Plan) restore(ctx context.Context, tc *transition.Client, rep *Report) Check {
	name := nameOf(p.Tier)
	t, err := tc.Get(ctx, name)
	if err != nil {
		return fail("restore", "the tier could not be read: %v", err)
	}
	found := p.Quiesce.Members[p.DrainMember]
	if transition.Intent(t, p.DrainMember) != string(found) {
		if found == "" {
			_, _, err = tc.Readmit(ctx, name, p.DrainMember)
		} else {
			_, _, err = tc.Quiesce(ctx, name, p.DrainMember, string(found))
		}
		if err != nil {
			return fail("restore", "the intent of %s could not be restored: %v", p.DrainMember, err)
		}
		rep.Transitions = append(rep.Transitions, Transition{Action: "restore", Member: p.DrainMember, Result: "intent restored"})
		if t, err = tc.Get(ctx, name); err != nil {
			return fail("restore", "the tier could not be read: %v", err)
		}
	}
	now := v1alpha1.QuiesceSpec{}
	if t.Spec.Quiesce != nil {
		now = *t.Spec.Quiesce
	}
	if !sameQuiesce(now, p.Quiesce) {
		return fail("restore", "the quiesce intent is %s, found %s (changed by someone else during the run?)",
			describeQuiesce(now), describeQuiesce(p.Quiesce))
	}
	return pass("restore", "the quiesce intent is as found (%s)", describeQuiesce(p.Quiesce))
}

// sameQuiesce compares two intents, an empty map equal to none.
func sameQuiesce(a, b v1alpha1.QuiesceSpec) bool {
	if len(a.Members) == 0 && len(b.Members) == 0 {
		return a.Tier == b.Tier
	}
	return a.Tier == b.Tier && reflect.DeepEqual(a.Members, b.Members)
}

// finish reads the router's decision summary and writes the artifacts.
func (p *Plan) finish(ctx context.Context, rep *Report) error {
	if p.opts.AdminURL != "" {
		rep.DecisionSummary = p.decisionSummary(ctx)
	}
	rep.FinishedAt = time.Now().UTC()
	rep.judge()
	return rep.WriteFiles(p.opts.OutDir)
}

// decisionSummary reads the router's summary; a failure is recorded in its
// place.
func (p *Plan) decisionSummary(ctx context.Context) json.RawMessage {
	client := p.opts.HTTPClient
	if p.opts.AdminToken != "" {
		client = &http.Client{Transport: bearer{p.opts.AdminToken, client.Transport}, CheckRedirect: client.CheckRedirect}
	}
	body, err := memberhttp.Get(ctx, client, p.opts.AdminURL+summaryPath, "application/json", memberReadTimeout, maxMemberBody)
	if err == nil && json.Valid(body) {
		return body
	}
	if err == nil {
		err = errors.New("not JSON")
	}
	b, _ := json.Marshal(map[string]string{"unavailable": err.Error()})
	return b
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// nameOf returns the name of a namespace/name key.
func nameOf(key string) string {
	for i := range len(key) {
		if key[i] == '/' {
			return key[i+1:]
		}
	}
	return key
}

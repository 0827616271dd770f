package tiers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/reqbody"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/upstream"
)

// Options configures a Set. The zero value applies tiers whose members are
// all ready, with pressure unknown, on the real clock.
type Options struct {
	// Readiness is read for every admission decision. Nil means every
	// member is ready.
	Readiness ReadinessView
	// Rechecker is told which members a readmission makes eligible
	// (docs/ROUTER.md#5-configuration-changes). Nil rechecks none.
	Rechecker Rechecker
	// Pressure is read for every admission decision of a Capacity tier.
	// Nil means every member's pressure is unknown.
	Pressure PressureView
	// HostAddrs returns this host's addresses. Apply reads it when a tier
	// with memberLocality SameHost names a member whose endpoint host is
	// not loopback, at most once per snapshot; such a member must have one
	// of these addresses. Nil means InterfaceAddrs.
	HostAddrs HostAddrs
	// Clock runs the tiers' admission owners (their queues' waits) when it
	// implements clock.Clock. Nil means the real clock.
	Clock clock.PassiveClock
	// AdmissionOptions are added to the options of every tier's admission
	// owner the Set creates (admission.New), such as admission.WithQueued.
	// Nil adds none.
	AdmissionOptions []admission.Option
	// Retain is called by Apply, once per snapshot and before the next
	// Apply, with the endpoint addresses (upstream.Target.Addr) of the
	// members of the tiers served after it: the member connections worth
	// keeping. Nil calls nothing.
	Retain func(addrs map[string]bool)
	// Logger receives the refused configurations, once per refused
	// generation. Nil discards them.
	Logger *slog.Logger
}

// Set is the tiers one router serves: it applies source snapshots (Plan,
// Apply) and holds the table in force, which the request path reads
// lock-free (Table), and it builds every admission decision's inputs from
// completed readiness and pressure snapshots (Inputs). Create it with New.
// All methods are safe for concurrent use.
type Set struct {
	readiness        ReadinessView
	recheck          Rechecker
	pressure         PressureView
	hostAddrs        HostAddrs
	clock            clock.PassiveClock
	admissionOptions []admission.Option
	retain           func(addrs map[string]bool)
	log              *slog.Logger

	table   atomic.Pointer[Table] // read lock-free by every request.
	applyMu sync.Mutex            // serializes Apply.
	// loggedFailures are the apply failures of the last Apply, so that a
	// refused generation is logged once; guarded by applyMu.
	loggedFailures map[string]ApplyFailure
	// addrsFailed says the last Apply could not read hostAddrs; guarded by
	// applyMu.
	addrsFailed bool
}

// New returns a Set with no tiers: its table names no alias until the
// first Apply.
func New(opts Options) *Set {
	set := &Set{
		readiness:        opts.Readiness,
		recheck:          opts.Rechecker,
		pressure:         opts.Pressure,
		hostAddrs:        opts.HostAddrs,
		clock:            opts.Clock,
		admissionOptions: opts.AdmissionOptions,
		retain:           opts.Retain,
		log:              opts.Logger,
	}
	if set.hostAddrs == nil {
		set.hostAddrs = InterfaceAddrs
	}
	if set.clock == nil {
		set.clock = clock.RealClock{}
	}
	if set.log == nil {
		set.log = slog.New(slog.DiscardHandler)
	}
	set.table.Store(&Table{aliases: map[string]aliasEntry{}, models: modelsBody(nil)})
	return set
}

// Table returns the table in force. It never waits.
func (set *Set) Table() *Table { return set.table.Load() }

// Readiness returns the readiness view the Set reads, nil when every
// member is ready.
func (set *Set) Readiness() ReadinessView { return set.readiness }

// Pressure returns the pressure view the Set reads, nil when every
// member's pressure is unknown.
func (set *Set) Pressure() PressureView { return set.pressure }

// Clock returns the clock the tiers' admission owners run on, which times
// their queues' waits.
func (set *Set) Clock() clock.PassiveClock { return set.clock }

// Dispatch admits the requests waiting in every tier's queue that a member
// can admit now. cmd/router calls it after each readiness probe, so that a
// member turning ready takes waiting requests at once; releases,
// readmissions and reconfigurations dispatch by themselves.
func (set *Set) Dispatch() {
	for _, ts := range set.table.Load().served {
		ts.admission.Dispatch()
	}
}

// removedReason is the tier quiesce reason the router sets on a tier that
// left the configuration while it still holds leases: it admits nothing
// more, and a drain of it waits for its last lease.
const removedReason = "removed"

// Tier is the state of one tier key. It outlives reconfigurations, so
// admission counts survive them, and it outlives the tier's removal until
// its last lease is released.
type Tier struct {
	key       string
	header    []string // {key}, the X-Sluice-Tier header value; never appended to.
	admission *admission.Tier
	cfg       atomic.Pointer[Config]
}

// Key returns the tier's namespace/name.
func (t *Tier) Key() string { return t.key }

// Header returns the X-Sluice-Tier header value of the tier's responses,
// {Key}: shared, never appended to.
func (t *Tier) Header() []string { return t.header }

// Admission returns the tier's admission owner.
func (t *Tier) Admission() *admission.Tier { return t.admission }

// Config returns the tier's configuration in force. Every tier a Table
// holds has one.
func (t *Tier) Config() *Config { return t.cfg.Load() }

// Config is one applied configuration of a tier. It is immutable.
type Config struct {
	tier          source.Tier     // as applied; Spec is the source's own copy.
	strategy      bounds.Strategy // empty for a direct tier.
	ids           []string        // sorted member ids.
	members       []Member        // sorted by id, parallel to ids.
	allReady      map[string]bool // every member ready, for a Set without readiness; read-only.
	headerTimeout time.Duration
	idleTimeout   time.Duration
	// upstreamModel is the JSON string that replaces the model a request
	// names before it goes upstream: the tier's servedModel. Nil forwards
	// the body unchanged (upstreamModel: Alias).
	upstreamModel []byte
}

// Source returns the source tier the configuration was applied from.
func (c *Config) Source() source.Tier { return c.tier }

// IDs returns the ids of the tier's members, sorted; read-only.
func (c *Config) IDs() []string { return c.ids }

// HeaderTimeout returns the tier's responseHeaderTimeout.
func (c *Config) HeaderTimeout() time.Duration { return c.headerTimeout }

// IdleTimeout returns the tier's idleTimeout.
func (c *Config) IdleTimeout() time.Duration { return c.idleTimeout }

// UpstreamModel returns the JSON string that replaces the model a request
// names before it goes upstream, the tier's servedModel, or nil when the
// body goes unchanged (upstreamModel: Alias); read-only.
func (c *Config) UpstreamModel() []byte { return c.upstreamModel }

// Member returns the route of member id, or nil.
func (c *Config) Member(id string) *Member {
	for i := range c.members {
		if c.members[i].id == id {
			return &c.members[i]
		}
	}
	return nil
}

// Member is where one member of a tier is reached. It is immutable.
type Member struct {
	id     string
	header []string // {id}, the X-Sluice-Member header value; never appended to.
	// target is the member's endpoint as the member client dials it.
	target upstream.Target
}

// ID returns the member's id.
func (m *Member) ID() string { return m.id }

// Header returns the X-Sluice-Member header value of the member's
// responses, {ID}: shared, never appended to.
func (m *Member) Header() []string { return m.header }

// Target returns the member's endpoint as the member client dials it;
// read-only.
func (m *Member) Target() *upstream.Target { return &m.target }

// newMember returns the route of member id at endpoint u, an absolute
// http or https URL. Its path, query and user info are not used: requests
// go to the path of their route, with their query normalised.
func newMember(id string, u *url.URL) Member {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return Member{id: id, header: []string{id}, target: upstream.Target{Addr: net.JoinHostPort(u.Hostname(), port),
		Scheme: u.Scheme, Host: u.Host, ServerName: u.Hostname()}}
}

// aliasEntry is one alias of the table: the tier and the alias string itself
// (so the request path need not allocate one).
type aliasEntry struct {
	alias string
	tier  *Tier
}

// Table is one immutable table of the tiers in force, swapped atomically
// by Apply; the request path reads it lock-free.
type Table struct {
	loaded      bool                  // a source snapshot was applied.
	aliases     map[string]aliasEntry // alias → tier.
	served      []*Tier               // sorted by key.
	retired     []*Tier               // removed but holding leases, sorted by key.
	rejected    []source.Rejection
	fileErrors  []source.FileError
	applyErrors map[string]ApplyFailure // tier key → its configuration that was not applied.
	models      []byte                  // the GET /v1/models body.
}

// Loaded reports whether a source snapshot was applied.
func (t *Table) Loaded() bool { return t.loaded }

// Served returns the tiers served, sorted by key; read-only.
func (t *Table) Served() []*Tier { return t.served }

// Retired returns the tiers that left the configuration but still hold
// leases, sorted by key; read-only.
func (t *Table) Retired() []*Tier { return t.retired }

// Rejected returns the tiers the source rejected; read-only.
func (t *Table) Rejected() []source.Rejection { return t.rejected }

// FileErrors returns the source's file errors (files mode); read-only.
func (t *Table) FileErrors() []source.FileError { return t.fileErrors }

// ApplyErrors returns, by tier key, the configurations of the last
// snapshot that were not applied; read-only.
func (t *Table) ApplyErrors() map[string]ApplyFailure { return t.applyErrors }

// Models returns the GET /v1/models body listing the aliases; read-only.
func (t *Table) Models() []byte { return t.models }

// Alias returns the tier an alias names and the alias as a string, without
// allocating.
func (t *Table) Alias(name []byte) (alias string, tier *Tier, ok bool) {
	e, ok := t.aliases[string(name)]
	return e.alias, e.tier, ok
}

// ApplyFailure is a tier configuration the Set could not apply.
type ApplyFailure struct {
	// Namespace and Name name the tier.
	Namespace, Name string
	// Generation is the refused configuration's; zero in files mode.
	Generation int64
	// Message says why, without endpoints or field values.
	Message string
}

// Lookup returns the tier key and whether it is served; a retired tier is
// found but not served.
func (t *Table) Lookup(key string) (*Tier, bool) {
	for i, list := range [][]*Tier{t.served, t.retired} {
		j := sort.Search(len(list), func(j int) bool { return list[j].key >= key })
		if j < len(list) && list[j].key == key {
			return list[j], i == 0
		}
	}
	return nil, false
}

// newTierConfig converts a source tier into the router's configuration and
// the admission configuration and intent to apply with it. addrs are this
// host's addresses, for the tier's member locality.
func newTierConfig(t source.Tier, addrs *hostAddrSet) (*Config, admission.Config, admission.Intent, error) {
	s := &t.Spec
	cfg := &Config{tier: t, headerTimeout: v1alpha1.DefaultResponseHeaderTimeout, idleTimeout: v1alpha1.DefaultIdleTimeout}
	if u := s.Upstream; u != nil {
		if u.ResponseHeaderTimeout != nil {
			cfg.headerTimeout = u.ResponseHeaderTimeout.Duration
		}
		if u.IdleTimeout != nil {
			cfg.idleTimeout = u.IdleTimeout.Duration
		}
	}
	cfg.strategy = s.EffectiveStrategy()
	if s.EffectiveUpstreamModel() == v1alpha1.UpstreamModelServedModel {
		cfg.upstreamModel = reqbody.Quote(s.ServedModel)
	}
	acfg := admission.Config{Strategy: cfg.strategy, Queue: admissionQueue(s.Queue)}
	if s.MaxConcurrency != nil {
		acfg.MaxConcurrency = int(*s.MaxConcurrency)
	}
	for _, m := range s.Members {
		u, err := url.Parse(m.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The member id is safe to name; the endpoint is not quoted.
			return nil, admission.Config{}, admission.Intent{}, fmt.Errorf("%w: member %s has an unusable endpoint", ErrInvalidTier, m.ID)
		}
		if err := checkLocality(s, m.ID, u.Hostname(), addrs); err != nil {
			return nil, admission.Config{}, admission.Intent{}, err
		}
		mc := admission.MemberConfig{ID: m.ID}
		if m.MaxConcurrency != nil {
			mc.MaxConcurrency = int(*m.MaxConcurrency)
		}
		acfg.Members = append(acfg.Members, mc)
		cfg.members = append(cfg.members, newMember(m.ID, u))
	}
	slices.SortFunc(cfg.members, func(a, b Member) int { return cmp.Compare(a.id, b.id) })
	cfg.allReady = make(map[string]bool, len(cfg.members))
	for _, m := range cfg.members {
		cfg.ids = append(cfg.ids, m.id)
		cfg.allReady[m.id] = true
	}
	var intent admission.Intent
	if q := s.Quiesce; q != nil {
		intent.Tier = q.Tier
		if len(q.Members) > 0 {
			intent.Members = make(map[string]string, len(q.Members))
			for id, reason := range q.Members {
				intent.Members[id] = string(reason)
			}
		}
	}
	return cfg, acfg, intent, nil
}

// admissionQueue converts a tier's spec.queue into the admission queue's
// configuration: nil (no queue) when the tier has none, and a tenant share of
// zero (the whole queue) when the spec sets none. The admission owner checks
// the bounds again when the configuration is applied.
func admissionQueue(q *v1alpha1.QueueSpec) *admission.Queue {
	if q == nil {
		return nil
	}
	out := &admission.Queue{MaxRequests: int(q.MaxRequests)}
	if q.MaxWait != nil {
		out.MaxWait = q.MaxWait.Duration
	}
	if q.MaxRequestsPerTenant != nil {
		out.MaxRequestsPerTenant = int(*q.MaxRequestsPerTenant)
	}
	return out
}

// Apply installs a complete source snapshot. Each served tier is applied
// atomically with admission.Tier.Apply (membership, ceilings and quiesce
// intent together): retained members keep their counts, removed members
// stop admitting and still receive their leases' releases, a lowered
// ceiling only blocks new admissions. A tier that left the snapshot stops
// admitting and stays visible on the admin API until its last lease is
// released. A tier whose new configuration cannot be applied keeps its
// previous one, and the error is reported on the admin API. Apply never
// waits for in-flight requests; it is safe to call concurrently with
// requests and with itself. It returns what it put in force, for the
// caller's summary; it logs only the refused configurations (once per
// refused generation).
func (set *Set) Apply(s source.Snapshot) ApplyResult {
	set.applyMu.Lock()
	defer set.applyMu.Unlock()
	old := set.table.Load()
	known := map[string]*Tier{}
	for _, ts := range slices.Concat(old.served, old.retired) {
		known[ts.key] = ts
	}
	next := &Table{
		loaded:      true,
		aliases:     map[string]aliasEntry{},
		rejected:    s.Rejected,
		fileErrors:  s.Errors,
		applyErrors: map[string]ApplyFailure{},
	}
	addrs := &hostAddrSet{source: set.hostAddrs} // read at most once, when a SameHost tier needs it.
	for _, t := range s.Tiers {
		ts, err := set.applyTier(known[t.Key], t, addrs)
		if err != nil {
			f := ApplyFailure{Namespace: t.Namespace, Name: t.Name, Generation: t.Generation, Message: err.Error()}
			next.applyErrors[t.Key] = f
			if set.loggedFailures[t.Key] != f { // once per refused generation, not once per snapshot.
				set.log.Warn("tier not applied", "tier", t.Key, "generation", t.Generation, "error", f.Message)
			}
		}
		if ts == nil {
			continue
		}
		delete(known, t.Key)
		next.served = append(next.served, ts)
		for _, alias := range ts.cfg.Load().tier.Spec.Aliases {
			if _, taken := next.aliases[alias]; !taken {
				next.aliases[alias] = aliasEntry{alias: alias, tier: ts}
			}
		}
	}
	for _, ts := range known { // tiers that left the configuration.
		_ = ts.admission.SetIntent(admission.Intent{Tier: removedReason})
		if ts.admission.Snapshot().Active > 0 {
			next.retired = append(next.retired, ts)
		}
	}
	if addrs.err != nil && !set.addrsFailed {
		// The cause is not logged: it is raw Go error text.
		set.log.Warn("host addresses could not be read: SameHost tiers accept loopback members only")
	}
	set.addrsFailed = addrs.err != nil
	set.loggedFailures = next.applyErrors
	slices.SortFunc(next.served, byKey)
	slices.SortFunc(next.retired, byKey)
	next.models = modelsBody(next.aliases)
	set.table.Store(next)
	if set.retain != nil {
		set.retain(next.memberAddrs())
	}
	applied := ApplyResult{Served: len(next.served)}
	for key, f := range next.applyErrors {
		applied.Refused = append(applied.Refused, RefusedTier{Key: key, Message: f.Message})
	}
	slices.SortFunc(applied.Refused, func(a, b RefusedTier) int { return cmp.Compare(a.Key, b.Key) })
	return applied
}

// ApplyResult is what one Apply put in force.
type ApplyResult struct {
	// Served is the number of tiers served after the Apply.
	Served int
	// Refused are the tiers of the snapshot whose configuration the router
	// refused, sorted by Key. Each keeps serving its previous
	// configuration, if it had one.
	Refused []RefusedTier
}

// RefusedTier is a tier configuration Apply refused.
type RefusedTier struct {
	// Key is the tier's namespace/name.
	Key string
	// Message says why, without endpoints or field values.
	Message string
}

// Plan returns the configuration Apply(s) would put in force, as a source
// snapshot, without applying anything: each tier of s whose configuration
// the router accepts (memberLocality included), and for a tier it would
// refuse, the configuration that tier keeps serving, if any. The readiness
// probes and pressure samples are registered with the plan before Apply
// (cmd/router), so a member whose endpoint changes is not ready before the
// router sends to it, and an endpoint the router refuses is never probed
// or sampled. Host addresses are read again by Apply; a change in between
// only delays a member's readiness to the next snapshot.
func (set *Set) Plan(s source.Snapshot) source.Snapshot {
	tab := set.table.Load()
	addrs := &hostAddrSet{source: set.hostAddrs}
	plan := source.Snapshot{Tiers: make([]source.Tier, 0, len(s.Tiers))}
	for _, t := range s.Tiers {
		if _, _, _, err := newTierConfig(t, addrs); err == nil {
			plan.Tiers = append(plan.Tiers, t)
			continue
		}
		if ts, served := tab.Lookup(t.Key); served {
			plan.Tiers = append(plan.Tiers, ts.cfg.Load().tier)
		}
	}
	return plan
}

// applyTier applies one source tier to its state, creating the state for a
// new key. On error it returns the state unchanged (nil for a new key): the
// previous configuration stays in force.
//
// Before the new intent is applied, every member it readmits is handed to
// the Rechecker (docs/ROUTER.md#5-configuration-changes), so that the
// member is not ready by the time admission can pick it, and stays out
// until a probe started after the readmission passes.
func (set *Set) applyTier(ts *Tier, t source.Tier, addrs *hostAddrSet) (*Tier, error) {
	cfg, acfg, intent, err := newTierConfig(t, addrs)
	if err != nil {
		if ts != nil && ts.cfg.Load() == nil {
			ts = nil
		}
		return ts, err
	}
	if ts == nil {
		ts = &Tier{key: t.Key, header: []string{t.Key}}
		opts := []admission.Option{admission.WithInputs(func() admission.Inputs {
			cfg := ts.cfg.Load()
			if cfg == nil {
				return admission.Inputs{} // refused as invalid: nothing waits before the first configuration.
			}
			return set.Inputs(ts, cfg)
		})}
		if c, ok := set.clock.(clock.Clock); ok {
			opts = append(opts, admission.WithClock(c))
		}
		adm, err := admission.New(acfg, append(opts, set.admissionOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidTier, err)
		}
		ts.admission = adm
	} else if set.recheck != nil {
		for _, id := range readmitted(ts.admission.Snapshot(), intent, cfg.ids) {
			set.recheck.Recheck(t.Key, id)
		}
	}
	if err := ts.admission.Apply(acfg, intent); err != nil {
		if ts.cfg.Load() == nil {
			ts = nil
		}
		return ts, fmt.Errorf("%w: %w", ErrInvalidTier, err)
	}
	ts.cfg.Store(cfg)
	// Apply dispatched on the configuration in force before; requests
	// waiting for room the new one adds are admitted now.
	ts.admission.Dispatch()
	return ts, nil
}

// readmitted returns the members of ids that the admission state in force
// keeps out by intent (the tier or the member itself is quiesced) and that
// intent lets admit: the members a member or tier readmission makes
// eligible. A member not in force (new, or removed and added again) is left
// out: the readiness cache registers it afresh, not ready.
func readmitted(in admission.Snapshot, intent admission.Intent, ids []string) []string {
	if intent.Tier != "" {
		return nil
	}
	var out []string
	for _, m := range in.Members {
		keptOut := in.Quiesced || m.Quiesced
		if m.Removed || !keptOut || intent.Members[m.ID] != "" {
			continue
		}
		if _, ok := slices.BinarySearch(ids, m.ID); ok {
			out = append(out, m.ID)
		}
	}
	return out
}

// Applied returns every tier of the last applied snapshot the router
// either serves or could not apply, sorted by key: the generation and
// members actually in force, and why the latest configuration was refused.
// Status reports take the generation from here, never from the snapshot,
// so they never claim a generation the router does not serve. Applied
// never waits.
func (set *Set) Applied() []adminapi.AppliedTier {
	tab := set.table.Load()
	out := make([]adminapi.AppliedTier, 0, len(tab.served)+len(tab.applyErrors))
	for _, ts := range tab.served {
		cfg := ts.cfg.Load()
		at := adminapi.AppliedTier{Key: ts.key, Namespace: cfg.tier.Namespace, Name: cfg.tier.Name,
			Generation: cfg.tier.Generation, Members: slices.Clone(cfg.ids)}
		if f, failed := tab.applyErrors[ts.key]; failed {
			at.ApplyError, at.FailedGeneration = f.Message, f.Generation
		}
		out = append(out, at)
	}
	for key, f := range tab.applyErrors {
		if _, served := tab.Lookup(key); !served {
			out = append(out, adminapi.AppliedTier{Key: key, Namespace: f.Namespace, Name: f.Name, Members: []string{},
				ApplyError: f.Message, FailedGeneration: f.Generation})
		}
	}
	slices.SortFunc(out, func(a, b adminapi.AppliedTier) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// byKey orders tier states by key.
func byKey(a, b *Tier) int {
	switch {
	case a.key < b.key:
		return -1
	case a.key > b.key:
		return 1
	}
	return 0
}

// modelsBody encodes the GET /v1/models list of the aliases, sorted.
func modelsBody(aliases map[string]aliasEntry) []byte {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for alias := range aliases {
		list.Data = append(list.Data, model{ID: alias, Object: "model", OwnedBy: "sluice"})
	}
	slices.SortFunc(list.Data, func(a, b model) int { return cmp.Compare(a.ID, b.ID) })
	body, err := json.Marshal(list)
	if err != nil {
		panic(err) // unreachable: strings and integers always encode.
	}
	return append(body, '\n')
}

// memberAddrs returns the addresses of the members of the table's served
// tiers: the connections worth keeping after a reconfiguration.
func (t *Table) memberAddrs() map[string]bool {
	addrs := map[string]bool{}
	for _, ts := range t.served {
		for _, m := range ts.cfg.Load().members {
			addrs[m.target.Addr] = true
		}
	}
	return addrs
}

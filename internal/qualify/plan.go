package qualify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/memberhttp"
	"github.com/sluice-dev/sluice/internal/transition"
)

// Defaults and bounds of a qualification.
const (
	// DefaultDuration is how long the direct and the routed phase each
	// run: a minute gives thousands of requests on a real engine.
	DefaultDuration = time.Minute
	// DefaultSustain is how long the routed phase with the drain runs.
	DefaultSustain = 2 * time.Minute
	// DefaultDrainTimeout bounds the wait for the quiesced member to drain.
	DefaultDrainTimeout = 5 * time.Minute
	// DefaultMaxTokens is each request's output limit: long enough to
	// stream, short enough that a phase sends many requests.
	DefaultMaxTokens = 64
	// MinDuration and MaxDuration bound every phase: below a second there
	// is no measurement, above an hour a typo holds the node.
	MinDuration = time.Second
	// MaxDuration is the upper bound of every phase and of the drain wait.
	MaxDuration = time.Hour
	// MaxConcurrency bounds the load: it is the API's ceiling bound.
	MaxConcurrency = v1alpha1.MaxConcurrency
	// DrainReason is the quiesce reason qualification sets on the member
	// it drains, so the tier's status and events say why.
	DrainReason = "qualification"
)

// The sentinel errors of the package; check them with errors.Is.
var (
	// ErrInvalidOptions means an option is outside its documented bounds.
	ErrInvalidOptions = errors.New("qualify: invalid options")
	// ErrNotQualifiable means the tier cannot be qualified as it stands:
	// not accepted, not applied by its router, quiesced, or a direct tier.
	ErrNotQualifiable = errors.New("qualify: tier not qualifiable now")
)

// Options configures one qualification. Tier, Client, RouterURL and OutDir
// are required.
type Options struct {
	// Namespace and Name name the tier.
	Namespace, Name string
	// Client reads the tier and changes its quiesce intent; Drain needs
	// its Watch.
	Client client.WithWatch
	// RouterURL is the router's front door on the node, such as
	// http://127.0.0.1:8080.
	RouterURL string
	// AdminURL is the router's admin listener, such as
	// http://127.0.0.1:9090; empty leaves the decision summary out.
	AdminURL string
	// AdminToken is the admin listener's bearer token; empty sends none.
	AdminToken string
	// APIKey is the front door's bearer API key; empty sends none.
	APIKey string
	// Duration is the length of the direct and of the routed phase; zero
	// means DefaultDuration.
	Duration time.Duration
	// Sustain is the length of the routed phase with the drain; zero means
	// DefaultSustain.
	Sustain time.Duration
	// DrainTimeout bounds the wait for the drained member; zero means
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// DrainMember is the member to quiesce and drain; empty means the
	// first member of the spec.
	DrainMember string
	// Concurrency is the routed load; zero means the tier's ceiling.
	Concurrency int
	// MaxTokens is each request's output limit; zero means
	// DefaultMaxTokens.
	MaxTokens int
	// OutDir receives report.json, chart.svg and summary.txt.
	OutDir string
	// HTTPClient reads the members' model lists and versions and the
	// router's decision summary; nil means the probes' client: no proxy,
	// no redirects, bounded waits. The load itself goes through internal/loadgen's own client.
	HTTPClient *http.Client
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Sustain == 0 {
		o.Sustain = DefaultSustain
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	switch {
	case o.Namespace == "" || o.Name == "":
		return bad("the tier is required as namespace/name")
	case o.Client == nil:
		return bad("a Kubernetes client is required")
	case !httpURL(o.RouterURL):
		return bad("the router URL must be an absolute http(s) URL without a path")
	case o.AdminURL != "" && !httpURL(o.AdminURL):
		return bad("the router admin URL must be an absolute http(s) URL without a path")
	case o.OutDir == "":
		return bad("an output directory is required")
	}
	for name, d := range map[string]time.Duration{"duration": o.Duration, "sustain": o.Sustain, "drain timeout": o.DrainTimeout} {
		if d < MinDuration || d > MaxDuration {
			return bad("%s must be between %v and %v", name, MinDuration, MaxDuration)
		}
	}
	if o.Concurrency < 0 || o.Concurrency > MaxConcurrency {
		return bad("concurrency must be 0..%d", MaxConcurrency)
	}
	if o.MaxTokens < 1 || o.MaxTokens > 65536 {
		return bad("max tokens must be 1..65536")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = memberhttp.NewClient(memberReadTimeout)
	}
	o.RouterURL = strings.TrimSuffix(o.RouterURL, "/")
	o.AdminURL = strings.TrimSuffix(o.AdminURL, "/")
	return o, nil
}

// httpURL reports whether s is an absolute http(s) URL with a host and no
// path, query or fragment.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		(u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && u.User == nil
}

// Member is one member as the plan loads it.
type Member struct {
	// ID is the member id.
	ID string `json:"id"`
	// Endpoint is the member's base URL. It stays in the plan and is never
	// written to the report.
	Endpoint string `json:"-"`
	// Ceiling is the member's maxConcurrency; zero when it has none.
	Ceiling int `json:"ceiling"`
	// Direct is the concurrency the direct phase sends to the member.
	Direct int `json:"direct_concurrency"`
}

// Plan is what a qualification will do to one tier, computed from the tier
// as it was read. It changes nothing.
type Plan struct {
	// Tier is namespace/name.
	Tier string `json:"tier"`
	// Generation is the tier's metadata.generation when it was read.
	Generation int64 `json:"generation"`
	// Node is spec.nodeName.
	Node string `json:"node"`
	// Alias is the alias routed requests name (the first).
	Alias string `json:"alias"`
	// ServedModel is the model every member must serve.
	ServedModel string `json:"served_model"`
	// Strategy is the tier's effective strategy.
	Strategy string `json:"strategy"`
	// Members are the tier's members in spec order.
	Members []Member `json:"members"`
	// Concurrency is the load of the direct and the routed phase.
	Concurrency int `json:"concurrency"`
	// SustainConcurrency is the routed load while one member drains: what
	// the other members admit, so no request is refused for capacity.
	SustainConcurrency int `json:"sustain_concurrency"`
	// DrainMember is the member quiesced, drained and readmitted.
	DrainMember string `json:"drain_member"`
	// Provenance is the tier's qualify.sluice.dev annotations.
	Provenance map[string]string `json:"provenance"`
	// Quiesce is the tier's quiesce intent as found, restored at the end.
	Quiesce v1alpha1.QuiesceSpec `json:"quiesce_as_found"`

	opts Options
}

// Prepare reads the tier and computes the plan. It changes nothing and
// contacts no engine. A tier that cannot be qualified now is
// ErrNotQualifiable with the reason.
func Prepare(ctx context.Context, opts Options) (*Plan, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	tc := &transition.Client{Client: o.Client, Namespace: o.Namespace}
	t, err := tc.Get(ctx, o.Name)
	if err != nil {
		return nil, err
	}
	key := t.Namespace + "/" + t.Name
	notNow := func(format string, args ...any) (*Plan, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrNotQualifiable, key, fmt.Sprintf(format, args...))
	}
	s := &t.Spec
	switch {
	case len(s.Members) < 2:
		return notNow("a direct tier (one member) has no member to drain while the others serve")
	case !conditionTrue(t, v1alpha1.ConditionAccepted) || t.Status.ObservedGeneration != t.Generation:
		return notNow("the manager has not accepted generation %d", t.Generation)
	case t.Status.Router == nil || t.Status.Router.AppliedGeneration != t.Generation:
		return notNow("the router on %s does not serve generation %d yet", s.NodeName, t.Generation)
	case s.Quiesce != nil && s.Quiesce.Tier != "":
		return notNow("the tier is quiesced (%s); readmit it first", s.Quiesce.Tier)
	case s.Quiesce != nil && len(s.Quiesce.Members) > 0:
		return notNow("members are quiesced (%s); qualification needs every member admitting", strings.Join(sortedKeys(s.Quiesce.Members), ", "))
	}
	p := &Plan{
		Tier: key, Generation: t.Generation, Node: s.NodeName, Alias: s.Aliases[0], ServedModel: s.ServedModel,
		Strategy: string(s.EffectiveStrategy()), Provenance: map[string]string{}, opts: o,
	}
	if s.Quiesce != nil {
		p.Quiesce = *s.Quiesce.DeepCopy()
	}
	for k, v := range t.Annotations {
		if strings.HasPrefix(k, "qualify.sluice.dev/") && k != v1alpha1.AnnotationAccepted {
			p.Provenance[k] = v
		}
	}
	sum := 0
	unbounded := false
	for _, m := range s.Members {
		pm := Member{ID: m.ID, Endpoint: m.Endpoint}
		if m.MaxConcurrency != nil {
			pm.Ceiling = int(*m.MaxConcurrency)
			sum += pm.Ceiling
		} else {
			unbounded = true
		}
		p.Members = append(p.Members, pm)
	}
	ceiling := sum
	if s.MaxConcurrency != nil && (unbounded || int(*s.MaxConcurrency) < ceiling) {
		ceiling = int(*s.MaxConcurrency)
	}
	p.Concurrency = o.Concurrency
	if p.Concurrency == 0 {
		if ceiling == 0 || (unbounded && s.MaxConcurrency == nil) {
			return notNow("the tier has no ceiling to load it at; give a concurrency")
		}
		p.Concurrency = ceiling
	}
	p.DrainMember = o.DrainMember
	if p.DrainMember == "" {
		p.DrainMember = s.Members[0].ID
	}
	if err := transition.CheckScope(t, p.DrainMember); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	p.splitDirect()
	p.SustainConcurrency = p.Concurrency
	for _, m := range p.Members {
		if m.ID == p.DrainMember && m.Ceiling > 0 {
			p.SustainConcurrency = max(1, min(p.Concurrency, sum-m.Ceiling))
		}
	}
	return p, nil
}

// splitDirect shares the plan's concurrency among the members for the
// direct phase, one at a time in spec order, never above a member's
// ceiling, so the engines see the load the router would give them.
func (p *Plan) splitDirect() {
	left := p.Concurrency
	for left > 0 {
		gave := false
		for i := range p.Members {
			m := &p.Members[i]
			if left > 0 && (m.Ceiling == 0 || m.Direct < m.Ceiling) {
				m.Direct++
				left--
				gave = true
			}
		}
		if !gave {
			return // every member at its ceiling: the rest would be refused through the router too.
		}
	}
}

// Write prints every step the plan would take.
func (p *Plan) Write(w io.Writer) error {
	o := p.opts
	var b strings.Builder
	fmt.Fprintf(&b, "Qualification plan for %s (generation %d, node %s, %s, served model %q)\n",
		p.Tier, p.Generation, p.Node, p.Strategy, p.ServedModel)
	fmt.Fprintf(&b, "Nothing has been changed and no engine has been contacted. Run with --execute to carry it out.\n\n")
	step := 0
	next := func(format string, args ...any) {
		step++
		fmt.Fprintf(&b, "%2d. %s\n", step, fmt.Sprintf(format, args...))
	}
	for _, m := range p.Members {
		next("identity: GET /v1/models of member %s must list %q; GET /version is compared with %s",
			m.ID, p.ServedModel, v1alpha1.AnnotationEngineVersion)
	}
	next("provenance: record %s, %s, %s (required) and %s", v1alpha1.AnnotationEngine,
		v1alpha1.AnnotationEngineVersion, v1alpha1.AnnotationEngineImage, v1alpha1.AnnotationRecipe)
	var direct []string
	for _, m := range p.Members {
		direct = append(direct, fmt.Sprintf("%s×%d", m.ID, m.Direct))
	}
	next("direct phase: %v of streaming chat requests (model %q, %d output tokens) straight to the members at concurrency %d (%s)",
		o.Duration, p.ServedModel, o.MaxTokens, p.Concurrency, strings.Join(direct, ", "))
	next("routed phase: the same requests for %v through the router at %s (model %q) at concurrency %d",
		o.Duration, o.RouterURL, p.Alias, p.Concurrency)
	next("sustained phase: routed requests for %v at concurrency %d; after a quarter of it, quiesce member %s (reason %q)",
		o.Sustain, p.SustainConcurrency, p.DrainMember, DrainReason)
	next("wait up to %v for the router to report %s Drained, then readmit it; every routed request must succeed", o.DrainTimeout, p.DrainMember)
	next("restore the tier's quiesce intent as found (%s)", describeQuiesce(p.Quiesce))
	if o.AdminURL != "" {
		next("read the router's decision summary from %s/admin/v1/decisions/summary", o.AdminURL)
	}
	next("write report.json, chart.svg and summary.txt to %s, with the verdict and the evidence label", o.OutDir)
	fmt.Fprintf(&b, "\nIt never promotes the tier: promotion is a person's %s annotation after reading a passing report of real evidence.\n",
		v1alpha1.AnnotationAccepted)
	_, err := io.WriteString(w, b.String())
	return err
}

// describeQuiesce says what quiesce intent q holds.
func describeQuiesce(q v1alpha1.QuiesceSpec) string {
	if q.Tier == "" && len(q.Members) == 0 {
		return "nothing quiesced"
	}
	parts := []string{}
	if q.Tier != "" {
		parts = append(parts, "tier: "+q.Tier)
	}
	for _, id := range sortedKeys(q.Members) {
		parts = append(parts, id+": "+string(q.Members[id]))
	}
	return strings.Join(parts, ", ")
}

// conditionTrue reports whether t's condition ct is True.
func conditionTrue(t *v1alpha1.ReplicaTier, ct v1alpha1.ConditionType) bool {
	return meta.IsStatusConditionTrue(t.Status.Conditions, string(ct))
}

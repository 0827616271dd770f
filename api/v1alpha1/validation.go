package v1alpha1

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sluice-dev/sluice/api/bounds"
)

// The member id and quiesce reason grammars, exported for callers that check
// input before it reaches the API server (the kubectl plugin's MCP server).
// They repeat the CRD markers on Member.ID and QuiesceReason; the validation
// table in test/envtest runs every rule against both.
const (
	// MemberIDPattern is the grammar of a member id (api/bounds).
	MemberIDPattern = bounds.MemberIDPattern
	// MaxMemberIDLength is the longest member id, in bytes.
	MaxMemberIDLength = bounds.MaxMemberIDLength
	// QuiesceReasonPattern is the grammar of a quiesce reason: 1-63
	// lowercase ASCII letters, digits and dashes, starting with a letter or
	// digit.
	QuiesceReasonPattern = `^[a-z0-9][a-z0-9-]{0,62}$`
	// MaxReasonLength is the longest quiesce reason, in bytes.
	MaxReasonLength = 63
)

// The patterns and bounds below repeat the CRD markers on the types; the
// validation table in test/envtest runs every rule against both.
const (
	aliasPattern       = `^[A-Za-z0-9][A-Za-z0-9._:/-]*$`
	tierReasonPattern  = `^([a-z0-9][a-z0-9-]{0,62})?$`
	metricsPathPattern = `^/[A-Za-z0-9._~/-]*$`
	// endpointHostPattern is the endpoint CEL rule's regular expression: the
	// host after the scheme (and any user info, which another rule rejects)
	// is localhost, a dotted IPv4 address or a bracketed IPv6 literal. A
	// regular expression over the bounded string keeps the rule's estimated
	// CEL cost within the API server's budget, which the CEL IP library on a
	// parsed host does not.
	endpointHostPattern = `^https?://([^/@]*@)?(localhost|((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])[.]){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?([/?#].*)?$`

	maxNodeNameLength    = 253
	maxAliasLength       = 128
	maxServedModelLength = 256
	maxEndpointLength    = 256
	maxMetricsPathLength = 256
	// maxSeriesSelectorLength is SeriesSelector's MaxLength marker.
	maxSeriesSelectorLength = bounds.MaxSeriesSelectorLength

	// minUpstreamTimeout and maxUpstreamTimeout bound both upstream
	// timeouts: below a second an engine's first token cannot arrive, above
	// an hour a hung member would hold its reservation for too long.
	minUpstreamTimeout = time.Second
	maxUpstreamTimeout = time.Hour
)

// Messages of the CEL rules, shared word for word with the CRD markers.
const (
	msgDirectStrategy   = "strategy must not be set on a direct tier (one member)"
	msgCapacityCeilings = "every member needs maxConcurrency when strategy is Capacity"
	msgQuiesceKeys      = "quiesce.members keys must be member ids"
	msgDirectQuiesce    = "quiesce.members must be empty on a direct tier (one member): quiesce the tier instead"
	msgEndpointURL      = "endpoint must be an absolute http or https URL"
	msgEndpointHost     = "endpoint host must be localhost or an IP literal"
	msgEndpointParts    = "endpoint must not contain user info, a query or a fragment"
	msgEndpointPath     = "endpoint must not have a path"
	msgHeaderTimeout    = "responseHeaderTimeout must be between 1s and 1h"
	msgIdleTimeout      = "idleTimeout must be between 1s and 1h"
	msgQueueWait        = "maxWait must be between 10ms and 10m"
	msgQueueTenant      = "maxRequestsPerTenant must not exceed maxRequests"
	msgMetricsSource    = "metrics must name an engine or series"
	msgSeriesSignal     = "series must name running, waiting or kvUsage"
	msgSeriesSelector   = `must be a Prometheus metric name with at most 4 label matchers, as name or name{label="value",...}`
)

var (
	memberIDRE      = regexp.MustCompile(MemberIDPattern)
	aliasRE         = regexp.MustCompile(aliasPattern)
	quiesceReasonRE = regexp.MustCompile(QuiesceReasonPattern)
	tierReasonRE    = regexp.MustCompile(tierReasonPattern)
	metricsPathRE   = regexp.MustCompile(metricsPathPattern)
	endpointHostRE  = regexp.MustCompile(endpointHostPattern)
	seriesRE        = regexp.MustCompile(bounds.SeriesSelectorPattern)
)

// Validate checks a ReplicaTier against every rule its CRD enforces and
// returns the violations in the API server's error vocabulary. It reads only
// the object, so the manager, the router's file source and tests share it.
func Validate(t *ReplicaTier) field.ErrorList {
	return ValidateSpec(&t.Spec, field.NewPath("spec"))
}

// ValidateSpec checks a ReplicaTierSpec found at path.
func ValidateSpec(s *ReplicaTierSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateString(s.NodeName, path.Child("nodeName"), 1, maxNodeNameLength, nil)...)
	errs = append(errs, validateAliases(s.Aliases, path.Child("aliases"))...)
	errs = append(errs, validateString(s.ServedModel, path.Child("servedModel"), 1, maxServedModelLength, nil)...)
	if s.Strategy != "" && !slices.Contains(bounds.Strategies(), s.Strategy) {
		errs = append(errs, field.NotSupported(path.Child("strategy"), s.Strategy, bounds.Strategies()))
	}
	switch s.UpstreamModel {
	case "", UpstreamModelServedModel, UpstreamModelAlias:
	default:
		errs = append(errs, field.NotSupported(path.Child("upstreamModel"), s.UpstreamModel,
			[]string{string(UpstreamModelServedModel), string(UpstreamModelAlias)}))
	}
	switch s.MemberLocality {
	case "", MemberLocalitySameHost, MemberLocalityAny:
	default:
		errs = append(errs, field.NotSupported(path.Child("memberLocality"), s.MemberLocality,
			[]string{string(MemberLocalitySameHost), string(MemberLocalityAny)}))
	}
	errs = append(errs, validateCeiling(s.MaxConcurrency, path.Child("maxConcurrency"))...)
	errs = append(errs, validateMembers(s.Members, path.Child("members"))...)
	if s.Upstream != nil {
		up := path.Child("upstream")
		errs = append(errs, validateTimeout(s.Upstream.ResponseHeaderTimeout, up.Child("responseHeaderTimeout"), msgHeaderTimeout)...)
		errs = append(errs, validateTimeout(s.Upstream.IdleTimeout, up.Child("idleTimeout"), msgIdleTimeout)...)
	}
	if s.Quiesce != nil {
		errs = append(errs, validateQuiesce(s.Quiesce, path.Child("quiesce"))...)
	}
	if s.Queue != nil {
		errs = append(errs, validateQueue(s.Queue, path.Child("queue"))...)
	}

	// The whole-spec CEL rules.
	if s.Strategy != "" && len(s.Members) <= 1 {
		errs = append(errs, field.Invalid(path, "object", msgDirectStrategy))
	}
	if s.Strategy == StrategyCapacity {
		for i := range s.Members {
			if s.Members[i].MaxConcurrency == nil {
				errs = append(errs, field.Invalid(path, "object", msgCapacityCeilings))
				break
			}
		}
	}
	if s.Quiesce != nil {
		for id := range s.Quiesce.Members {
			if !hasMember(s.Members, id) {
				errs = append(errs, field.Invalid(path, "object", msgQuiesceKeys))
				break
			}
		}
		if len(s.Quiesce.Members) > 0 && len(s.Members) <= 1 {
			errs = append(errs, field.Invalid(path, "object", msgDirectQuiesce))
		}
	}
	return errs
}

func validateAliases(aliases []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case aliases == nil:
		errs = append(errs, field.Required(path, ""))
	case len(aliases) == 0:
		errs = append(errs, field.Invalid(path, len(aliases), "should have at least 1 items"))
	case len(aliases) > MaxAliases:
		errs = append(errs, field.TooMany(path, len(aliases), MaxAliases))
	}
	seen := make(map[string]bool, len(aliases))
	for i, a := range aliases {
		p := path.Index(i)
		errs = append(errs, validateString(a, p, 1, maxAliasLength, aliasRE)...)
		if seen[a] {
			errs = append(errs, field.Duplicate(p, a))
		}
		seen[a] = true
	}
	return errs
}

func validateMembers(members []Member, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case members == nil:
		errs = append(errs, field.Required(path, ""))
	case len(members) == 0:
		errs = append(errs, field.Invalid(path, len(members), "should have at least 1 items"))
	case len(members) > MaxMembers:
		errs = append(errs, field.TooMany(path, len(members), MaxMembers))
	}
	seen := make(map[string]bool, len(members))
	for i := range members {
		m := &members[i]
		p := path.Index(i)
		errs = append(errs, validateString(m.ID, p.Child("id"), 1, MaxMemberIDLength, memberIDRE)...)
		if seen[m.ID] {
			// The API server names the list entry (spec.members[i]:
			// Duplicate value: map[...]); this names the field and its
			// value, which the entry's path contains.
			errs = append(errs, field.Duplicate(p.Child("id"), m.ID))
		}
		seen[m.ID] = true
		errs = append(errs, validateEndpoint(m.Endpoint, p.Child("endpoint"))...)
		errs = append(errs, validateCeiling(m.MaxConcurrency, p.Child("maxConcurrency"))...)
		if m.Metrics != nil {
			errs = append(errs, validateMetrics(m.Metrics, p.Child("metrics"))...)
		}
	}
	return errs
}

// validateMetrics mirrors MetricsSpec's markers: the engine enum, the path
// pattern, the series selectors' length and CEL rule, and the CEL rules
// that metrics name an engine or series and series name a signal.
func validateMetrics(m *MetricsSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Engine != "" && !slices.Contains(Engines(), m.Engine) {
		errs = append(errs, field.NotSupported(path.Child("engine"), m.Engine, Engines()))
	}
	if m.Path != "" {
		errs = append(errs, validateString(m.Path, path.Child("path"), 0, maxMetricsPathLength, metricsPathRE)...)
	}
	if m.Engine == "" && m.Series == nil {
		errs = append(errs, field.Invalid(path, "object", msgMetricsSource))
	}
	if s := m.Series; s != nil {
		sp := path.Child("series")
		for _, sel := range []struct {
			name  string
			value SeriesSelector
		}{{"running", s.Running}, {"waiting", s.Waiting}, {"kvUsage", s.KVUsage}} {
			errs = append(errs, validateSelector(string(sel.value), sp.Child(sel.name))...)
		}
		if *s == (SeriesSpec{}) {
			errs = append(errs, field.Invalid(sp, "object", msgSeriesSignal))
		}
	}
	return errs
}

// validateSelector checks a SeriesSelector: absent, or within its length and
// matching bounds.SeriesSelectorPattern (its CEL rule).
func validateSelector(s string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s == "" {
		return nil
	}
	if len(s) > maxSeriesSelectorLength {
		errs = append(errs, field.TooLong(path, "", maxSeriesSelectorLength))
	}
	if !seriesRE.MatchString(s) {
		errs = append(errs, field.Invalid(path, "string", msgSeriesSelector))
	}
	return errs
}

// validateEndpoint mirrors the endpoint's CEL rules, which use the Kubernetes
// CEL URL library: isURL and url() accept what url.ParseRequestURI accepts.
func validateEndpoint(endpoint string, path *field.Path) field.ErrorList {
	errs := validateString(endpoint, path, 1, maxEndpointLength, nil)
	if len(errs) > 0 {
		return errs
	}
	u, err := url.ParseRequestURI(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		errs = append(errs, field.Invalid(path, "string", msgEndpointURL))
	}
	if err == nil {
		if !endpointHostRE.MatchString(endpoint) {
			errs = append(errs, field.Invalid(path, "string", msgEndpointHost))
		}
		if p := u.EscapedPath(); p != "" && p != "/" {
			errs = append(errs, field.Invalid(path, "string", msgEndpointPath))
		}
	}
	if strings.ContainsAny(endpoint, "@?#") {
		errs = append(errs, field.Invalid(path, "string", msgEndpointParts))
	}
	return errs
}

func validateCeiling(v *int32, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return validateRange(*v, path, MinConcurrency, MaxConcurrency)
}

// validateRange checks an integer's OpenAPI minimum and maximum, in the API
// server's words.
func validateRange(v int32, path *field.Path, minimum, maximum int32) field.ErrorList {
	switch {
	case v < minimum:
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("should be greater than or equal to %d", minimum))}
	case v > maximum:
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("should be less than or equal to %d", maximum))}
	}
	return nil
}

func validateTimeout(d *metav1.Duration, path *field.Path, msg string) field.ErrorList {
	if d == nil {
		return nil
	}
	if v := d.Duration; v < minUpstreamTimeout || v > maxUpstreamTimeout {
		return field.ErrorList{field.Invalid(path, "string", msg)}
	}
	return nil
}

// validateQueue mirrors the queue's markers: required fields, the integer
// bounds, the maxWait CEL rule on the field and the per-tenant CEL rule on
// the object.
func validateQueue(q *QueueSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.MaxRequests == 0 {
		errs = append(errs, field.Required(path.Child("maxRequests"), ""))
	} else {
		errs = append(errs, validateRange(q.MaxRequests, path.Child("maxRequests"), 1, MaxQueueRequests)...)
	}
	switch {
	case q.MaxWait == nil:
		errs = append(errs, field.Required(path.Child("maxWait"), ""))
	case q.MaxWait.Duration < MinQueueWait || q.MaxWait.Duration > MaxQueueWait:
		errs = append(errs, field.Invalid(path.Child("maxWait"), "string", msgQueueWait))
	}
	if q.MaxRequestsPerTenant != nil {
		errs = append(errs, validateRange(*q.MaxRequestsPerTenant, path.Child("maxRequestsPerTenant"), 1, MaxQueueRequests)...)
		if q.MaxRequests != 0 && *q.MaxRequestsPerTenant > q.MaxRequests {
			errs = append(errs, field.Invalid(path, "object", msgQueueTenant))
		}
	}
	return errs
}

func validateQuiesce(q *QuiesceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(q.Tier) > MaxReasonLength {
		errs = append(errs, field.TooLong(path.Child("tier"), "", MaxReasonLength))
	} else if !tierReasonRE.MatchString(q.Tier) {
		errs = append(errs, field.Invalid(path.Child("tier"), q.Tier, "should match '"+tierReasonPattern+"'"))
	}
	mp := path.Child("members")
	if len(q.Members) > MaxMembers {
		errs = append(errs, field.TooMany(mp, len(q.Members), MaxMembers))
	}
	for _, id := range sortedKeys(q.Members) {
		// The API server names a map value's path with a dot, not brackets.
		errs = append(errs, validateString(string(q.Members[id]), mp.Child(id), 1, MaxReasonLength, quiesceReasonRE)...)
	}
	return errs
}

// validateString checks a length range and, when re is set, a pattern, in
// the order and words of OpenAPI schema validation.
func validateString(s string, path *field.Path, minLen, maxLen int, re *regexp.Regexp) field.ErrorList {
	switch {
	case s == "" && minLen > 0:
		return field.ErrorList{field.Required(path, "")}
	case len(s) > maxLen:
		return field.ErrorList{field.TooLong(path, "", maxLen)}
	case re != nil && !re.MatchString(s):
		return field.ErrorList{field.Invalid(path, s, "should match '"+re.String()+"'")}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasMember(members []Member, id string) bool {
	for i := range members {
		if members[i].ID == id {
			return true
		}
	}
	return false
}

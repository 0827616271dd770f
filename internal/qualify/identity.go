package qualify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/memberhttp"
	"github.com/sluice-dev/sluice/internal/readiness"
)

// Member reads.
const (
	// memberReadTimeout bounds one GET of a member's model list or
	// version: a healthy engine answers in milliseconds.
	memberReadTimeout = 5 * time.Second
	// maxMemberBody bounds what is read of those answers.
	maxMemberBody = 1 << 20
	// versionPath is where vLLM reports its version.
	versionPath = "/version"
	// simulatorOwner is the owned_by of enginesim's models: a member that
	// says it is the simulator makes the evidence synthetic.
	simulatorOwner = "enginesim"
)

// Evidence labels.
const (
	// EvidenceSynthetic labels a report whose engines include a simulator:
	// it proves the procedure and the router, not the engines.
	EvidenceSynthetic = "synthetic"
	// EvidenceReal labels a report whose every engine is a real one.
	EvidenceReal = "real"
)

// requiredProvenance are the annotations a tier must declare.
var requiredProvenance = []string{v1alpha1.AnnotationEngine, v1alpha1.AnnotationEngineVersion, v1alpha1.AnnotationEngineImage}

// MemberIdentity is what a member says it serves.
type MemberIdentity struct {
	// ID is the member id.
	ID string `json:"id"`
	// ServesModel is true when its model list holds the served model.
	ServesModel bool `json:"serves_model"`
	// Problem says why not, without URLs or bodies.
	Problem string `json:"problem,omitempty"`
	// OwnedBy is the owned_by of the served model's entry.
	OwnedBy string `json:"owned_by,omitempty"`
	// Version is what GET /version reported; empty when it did not.
	Version string `json:"version,omitempty"`
}

// identify reads each member's model list and version.
func (p *Plan) identify(ctx context.Context) []MemberIdentity {
	out := make([]MemberIdentity, 0, len(p.Members))
	for _, m := range p.Members {
		id := MemberIdentity{ID: m.ID}
		body, err := p.get(ctx, m.Endpoint, readiness.ModelsPath)
		if err == nil {
			id.OwnedBy, err = readiness.ModelOwner(body, p.ServedModel)
		}
		if err != nil {
			id.Problem = err.Error()
		} else {
			id.ServesModel = true
		}
		if body, err := p.get(ctx, m.Endpoint, versionPath); err == nil {
			var v struct {
				Version string `json:"version"`
			}
			if json.Unmarshal(body, &v) == nil {
				id.Version = v.Version
			}
		}
		out = append(out, id)
	}
	return out
}

// get reads one bounded answer of a member.
func (p *Plan) get(ctx context.Context, endpoint, path string) ([]byte, error) {
	u, err := memberhttp.JoinURL(endpoint, path)
	if err != nil {
		return nil, err
	}
	return memberhttp.Get(ctx, p.opts.HTTPClient, u, "application/json", memberReadTimeout, maxMemberBody)
}

// evidence is the label the identities give.
func evidence(ids []MemberIdentity) string {
	for _, id := range ids {
		if id.OwnedBy == simulatorOwner {
			return EvidenceSynthetic
		}
	}
	return EvidenceReal
}

// identityCheck passes when every member serves the served model.
func identityCheck(ids []MemberIdentity, served string) Check {
	var bad []string
	for _, id := range ids {
		if !id.ServesModel {
			bad = append(bad, fmt.Sprintf("%s (%s)", id.ID, id.Problem))
		}
	}
	if len(bad) > 0 {
		return fail("identity", "members not serving %q: %s", served, strings.Join(bad, "; "))
	}
	return pass("identity", "every member lists %q", served)
}

// provenanceCheck passes when the required annotations are declared, the
// engine is one sluice knows, and every member that reports a version
// reports the declared one.
func provenanceCheck(declared map[string]string, ids []MemberIdentity) Check {
	var problems []string
	for _, k := range requiredProvenance {
		if strings.TrimSpace(declared[k]) == "" {
			problems = append(problems, "missing "+k)
		}
	}
	if e := declared[v1alpha1.AnnotationEngine]; e != "" && !slices.Contains(v1alpha1.Engines(), v1alpha1.Engine(e)) {
		problems = append(problems, fmt.Sprintf("%s %q is not %s", v1alpha1.AnnotationEngine, e, engineList()))
	}
	want := declared[v1alpha1.AnnotationEngineVersion]
	reported := 0
	for _, id := range ids {
		if id.Version == "" {
			continue
		}
		reported++
		if want != "" && id.Version != want {
			problems = append(problems, fmt.Sprintf("member %s reports version %q, declared %q", id.ID, id.Version, want))
		}
	}
	if len(problems) > 0 {
		return fail("provenance", "%s", strings.Join(problems, "; "))
	}
	versions := "no member reports its version"
	if reported > 0 {
		versions = fmt.Sprintf("%d of %d members report it", reported, len(ids))
	}
	return pass("provenance", "declared engine %s %s (%s), image %s",
		declared[v1alpha1.AnnotationEngine], want, versions, declared[v1alpha1.AnnotationEngineImage])
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// engineList names the engines as a sentence does: "vllm, sglang, llamacpp
// or tgi".
func engineList() string {
	names := make([]string, 0, len(v1alpha1.Engines()))
	for _, e := range v1alpha1.Engines() {
		names = append(names, string(e))
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
)

// The soak's one tier.
const (
	tierNamespace = "soak"
	tierName      = "chaos"
	tierKey       = tierNamespace + "/" + tierName
	tierAlias     = "soak-chaos"
	servedModel   = "soak/model"
	nodeName      = "soak-node"
	manifestFile  = "chaos.yaml"
	// quiesceReason is the reason the soak writes when it quiesces.
	quiesceReason = "soak"
)

// The tier's admission queue, when the chaos gives it one: room for every
// worker beyond the base ceilings (24 workers, 16 slots), and a wait that
// outlasts a generation but not a killed engine's restart, so that waiting
// requests are admitted, time out and are refused by quiesces alike.
const (
	queueMaxRequests = 16
	queueMaxWait     = time.Second
)

// errBadTierConfig reports a tier configuration the soak would not write.
var errBadTierConfig = errors.New("soak: invalid tier configuration")

// memberConfig is one member of the tier: its id and ceiling.
type memberConfig struct {
	ID      string `json:"id"`
	Ceiling int    `json:"ceiling"`
}

// tierConfig is the part of the tier's manifest the soak changes.
type tierConfig struct {
	Strategy       string          `json:"strategy"`
	Members        []memberConfig  `json:"members"`
	QuiesceTier    bool            `json:"quiesce_tier,omitempty"`
	QuiesceMembers map[string]bool `json:"quiesce_members,omitempty"`
	// Queue gives the tier its admission queue (queueMaxRequests,
	// queueMaxWait).
	Queue bool `json:"queue,omitempty"`
}

// clone returns a deep copy.
func (c tierConfig) clone() tierConfig {
	c.Members = slices.Clone(c.Members)
	c.QuiesceMembers = maps.Clone(c.QuiesceMembers)
	return c
}

// ceiling returns the member's ceiling, or 0 when it is not a member.
func (c tierConfig) ceiling(id string) int {
	for _, m := range c.Members {
		if m.ID == id {
			return m.Ceiling
		}
	}
	return 0
}

// admitCeiling returns how many requests the member may be admitted up to:
// its ceiling, or 0 when it is not a member or it or the tier is quiesced.
func (c tierConfig) admitCeiling(id string) int {
	if c.QuiesceTier || c.QuiesceMembers[id] {
		return 0
	}
	return c.ceiling(id)
}

// memberIDs returns the member ids in order.
func (c tierConfig) memberIDs() []string {
	out := make([]string, 0, len(c.Members))
	for _, m := range c.Members {
		out = append(out, m.ID)
	}
	return out
}

// upstreamTimeout is the tier's responseHeaderTimeout and idleTimeout: the
// shortest the API accepts (1 s), so that stalled requests end quickly and
// often. A fault-free request of the soak answers in milliseconds.
const upstreamTimeout = time.Second

// timeouts are the tier's upstream timeouts.
var timeouts = sluicev1.UpstreamSpec{
	ResponseHeaderTimeout: &metav1.Duration{Duration: upstreamTimeout},
	IdleTimeout:           &metav1.Duration{Duration: upstreamTimeout},
}

// manifest renders c as a validated ReplicaTier whose members point at
// addrs.
func manifest(c tierConfig, addrs map[string]string) ([]byte, error) {
	t := &sluicev1.ReplicaTier{
		TypeMeta:   metav1.TypeMeta{APIVersion: "sluice.dev/v1alpha1", Kind: "ReplicaTier"},
		ObjectMeta: metav1.ObjectMeta{Name: tierName, Namespace: tierNamespace},
		Spec: sluicev1.ReplicaTierSpec{
			NodeName:    nodeName,
			Aliases:     []string{tierAlias},
			ServedModel: servedModel,
			Strategy:    sluicev1.Strategy(c.Strategy),
			Upstream:    timeouts.DeepCopy(),
		},
	}
	for _, m := range c.Members {
		addr, ok := addrs[m.ID]
		if !ok {
			return nil, fmt.Errorf("%w: no engine for member %s", errBadTierConfig, m.ID)
		}
		ceiling := int32(m.Ceiling) //nolint:gosec // ceilings are small constants.
		t.Spec.Members = append(t.Spec.Members, sluicev1.Member{
			ID: m.ID, Endpoint: "http://" + addr, MaxConcurrency: &ceiling,
			Metrics: &sluicev1.MetricsSpec{Engine: sluicev1.EngineVLLM},
		})
	}
	if c.Queue {
		t.Spec.Queue = &sluicev1.QueueSpec{MaxRequests: queueMaxRequests, MaxWait: &metav1.Duration{Duration: queueMaxWait}}
	}
	if c.QuiesceTier || len(c.QuiesceMembers) > 0 {
		t.Spec.Quiesce = &sluicev1.QuiesceSpec{}
		if c.QuiesceTier {
			t.Spec.Quiesce.Tier = quiesceReason
		}
		for _, id := range slices.Sorted(maps.Keys(c.QuiesceMembers)) {
			if t.Spec.Quiesce.Members == nil {
				t.Spec.Quiesce.Members = map[string]sluicev1.QuiesceReason{}
			}
			t.Spec.Quiesce.Members[id] = quiesceReason
		}
	}
	if errs := sluicev1.Validate(t); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", errBadTierConfig, errs.ToAggregate())
	}
	return yaml.Marshal(t)
}

// writeManifest writes c into dir atomically (a temporary file renamed over
// the manifest), so that the router never reads half a file.
func writeManifest(dir string, c tierConfig, addrs map[string]string) error {
	raw, err := manifest(c, addrs)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+manifestFile+".tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, manifestFile))
}

// applied reports whether the router's view of the tier (GET
// /admin/v1/tiers/{ns}/{name}) is c, and if not, why.
func applied(v adminapi.TierView, c tierConfig) (bool, string) {
	switch {
	case v.SourceError != "" || v.ApplyError != "":
		return false, "source or apply error: " + v.SourceError + v.ApplyError
	case !v.Served:
		return false, "not served"
	case v.Strategy != c.Strategy:
		return false, "strategy " + v.Strategy
	case (v.Quiesce.Tier != "") != c.QuiesceTier:
		return false, "tier quiesce " + v.Quiesce.Tier
	}
	if len(v.Members) != len(c.Members) {
		return false, fmt.Sprintf("%d members", len(v.Members))
	}
	for i, m := range v.Members {
		want := c.Members[i]
		if m.ID != want.ID || m.MaxConcurrency == nil || int(*m.MaxConcurrency) != want.Ceiling {
			return false, "member " + m.ID + " differs"
		}
	}
	var quiesced []string
	for id := range v.Quiesce.Members {
		quiesced = append(quiesced, id)
	}
	slices.Sort(quiesced)
	want := slices.Sorted(maps.Keys(c.QuiesceMembers))
	if !slices.Equal(quiesced, want) {
		return false, "quiesced members " + strings.Join(quiesced, ",")
	}
	return true, ""
}

package qualify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

const served = "org/model"

// tier is a three-member Capacity tier the manager accepted and the router
// applies.
func tier() *v1alpha1.ReplicaTier {
	t := &v1alpha1.ReplicaTier{
		ObjectMeta: metav1.ObjectMeta{Namespace: "inference", Name: "llama", Generation: 3, Annotations: map[string]string{
			v1alpha1.AnnotationEngine: "vllm", v1alpha1.AnnotationEngineVersion: "0.11.0",
			v1alpha1.AnnotationEngineImage: "r/vllm@sha256:abc", v1alpha1.AnnotationAccepted: "someone:x:y", "other": "z",
		}},
		Spec: v1alpha1.ReplicaTierSpec{
			NodeName: "gpu-node-1", Aliases: []string{"llama", "chat"}, ServedModel: served, Strategy: v1alpha1.StrategyCapacity,
			Members: []v1alpha1.Member{
				{ID: "gpu0", Endpoint: "http://127.0.0.1:8001", MaxConcurrency: ptr.To[int32](4)},
				{ID: "gpu1", Endpoint: "http://127.0.0.1:8002", MaxConcurrency: ptr.To[int32](2)},
				{ID: "gpu2", Endpoint: "http://127.0.0.1:8003", MaxConcurrency: ptr.To[int32](2)},
			},
		},
		Status: v1alpha1.ReplicaTierStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{{Type: string(v1alpha1.ConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted"}},
			Router:             &v1alpha1.RouterStatus{Node: "gpu-node-1", AppliedGeneration: 3},
		},
	}
	return t
}

func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&v1alpha1.ReplicaTier{}).Build()
}

func options(c client.WithWatch) Options {
	return Options{Namespace: "inference", Name: "llama", Client: c, RouterURL: "http://127.0.0.1:8080", OutDir: "out"}
}

func TestPrepare(t *testing.T) {
	p, err := Prepare(context.Background(), options(fakeClient(t, tier())))
	if err != nil {
		t.Fatal(err)
	}
	if p.Tier != "inference/llama" || p.Alias != "llama" || p.Concurrency != 8 || p.DrainMember != "gpu0" {
		t.Fatalf("plan = %+v", p)
	}
	// gpu0 (ceiling 4) drains: the other members admit 4.
	if p.SustainConcurrency != 4 {
		t.Fatalf("SustainConcurrency = %d, want 4", p.SustainConcurrency)
	}
	if got := []int{p.Members[0].Direct, p.Members[1].Direct, p.Members[2].Direct}; got[0] != 4 || got[1] != 2 || got[2] != 2 {
		t.Fatalf("direct split = %v, want [4 2 2]", got)
	}
	if _, ok := p.Provenance[v1alpha1.AnnotationAccepted]; ok || len(p.Provenance) != 3 {
		t.Fatalf("provenance = %v: the three declarations, never the acceptance", p.Provenance)
	}
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Nothing has been changed", "quiesce member gpu0", "concurrency 8 (gpu0×4, gpu1×2, gpu2×2)", "never promotes"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

func TestPrepareTierCeilingAndOptions(t *testing.T) {
	tr := tier()
	tr.Spec.MaxConcurrency = ptr.To[int32](5)
	o := options(fakeClient(t, tr))
	o.DrainMember = "gpu2"
	p, err := Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Concurrency != 5 || p.SustainConcurrency != 5 || p.DrainMember != "gpu2" {
		t.Fatalf("plan = %+v, want concurrency 5 (tier ceiling), sustain min(5, 8-2)", p)
	}
	if got := []int{p.Members[0].Direct, p.Members[1].Direct, p.Members[2].Direct}; got[0] != 2 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("direct split = %v, want [2 2 1]", got)
	}
}

func TestPrepareRefuses(t *testing.T) {
	tests := []struct {
		desc    string
		mutate  func(*v1alpha1.ReplicaTier, *Options)
		wantErr error
		want    string
	}{
		{"direct tier", func(t *v1alpha1.ReplicaTier, _ *Options) { t.Spec.Members = t.Spec.Members[:1]; t.Spec.Strategy = "" },
			ErrNotQualifiable, "direct tier"},
		{"not accepted", func(t *v1alpha1.ReplicaTier, _ *Options) { t.Status.Conditions = nil }, ErrNotQualifiable, "not accepted"},
		{"not observed", func(t *v1alpha1.ReplicaTier, _ *Options) { t.Status.ObservedGeneration = 2 }, ErrNotQualifiable, "not accepted"},
		{"not applied", func(t *v1alpha1.ReplicaTier, _ *Options) { t.Status.Router.AppliedGeneration = 2 }, ErrNotQualifiable, "does not serve"},
		{"tier quiesced", func(t *v1alpha1.ReplicaTier, _ *Options) { t.Spec.Quiesce = &v1alpha1.QuiesceSpec{Tier: "upgrade"} },
			ErrNotQualifiable, "tier is quiesced"},
		{"member quiesced", func(t *v1alpha1.ReplicaTier, _ *Options) {
			t.Spec.Quiesce = &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu1": "x"}}
		}, ErrNotQualifiable, "gpu1"},
		{"no ceiling", func(t *v1alpha1.ReplicaTier, _ *Options) {
			t.Spec.Strategy = v1alpha1.StrategyRoundRobin
			t.Spec.Members[1].MaxConcurrency = nil
		}, ErrNotQualifiable, "no ceiling"},
		{"unknown drain member", func(_ *v1alpha1.ReplicaTier, o *Options) { o.DrainMember = "gpu9" }, ErrInvalidOptions, "gpu9"},
		{"no router URL", func(_ *v1alpha1.ReplicaTier, o *Options) { o.RouterURL = "127.0.0.1:8080" }, ErrInvalidOptions, "router URL"},
		{"router URL with a path", func(_ *v1alpha1.ReplicaTier, o *Options) { o.RouterURL = "http://h/v1" }, ErrInvalidOptions, "router URL"},
		{"sustain too short", func(_ *v1alpha1.ReplicaTier, o *Options) { o.Sustain = time.Millisecond }, ErrInvalidOptions, "sustain"},
		{"duration too long", func(_ *v1alpha1.ReplicaTier, o *Options) { o.Duration = 2 * time.Hour }, ErrInvalidOptions, "duration"},
		{"negative concurrency", func(_ *v1alpha1.ReplicaTier, o *Options) { o.Concurrency = -1 }, ErrInvalidOptions, "concurrency"},
		{"no output directory", func(_ *v1alpha1.ReplicaTier, o *Options) { o.OutDir = "" }, ErrInvalidOptions, "output"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			tr := tier()
			o := options(nil)
			tt.mutate(tr, &o)
			o.Client = fakeClient(t, tr)
			_, err := Prepare(context.Background(), o)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Prepare = %v, want %v mentioning %q", err, tt.wantErr, tt.want)
			}
		})
	}
}

func TestIdentityAndEvidence(t *testing.T) {
	engine := func(models, version string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v1/models":
				_, _ = w.Write([]byte(models))
			case r.URL.Path == "/version" && version != "":
				_, _ = w.Write([]byte(`{"version":"` + version + `"}`))
			default:
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	list := func(id, owner string) string {
		return `{"object":"list","data":[{"id":"` + id + `","object":"model","owned_by":"` + owner + `"}]}`
	}
	o, err := options(fakeClient(t)).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := &Plan{ServedModel: served, opts: o, Members: []Member{
		{ID: "a", Endpoint: engine(list(served, "vllm"), "0.11.0")},
		{ID: "b", Endpoint: engine(list("other/model", "vllm"), "")},
		{ID: "c", Endpoint: engine(list(served, "enginesim"), "0.10.2")},
	}}
	ids := p.identify(context.Background())
	if !ids[0].ServesModel || ids[0].Version != "0.11.0" || ids[0].OwnedBy != "vllm" || ids[1].ServesModel || ids[1].Problem == "" ||
		!ids[2].ServesModel {
		t.Fatalf("identities = %+v", ids)
	}
	if c := identityCheck(ids, served); c.Pass || !strings.Contains(c.Detail, "b (") {
		t.Fatalf("identity check = %+v, want a failure naming b", c)
	}
	if got := evidence(ids); got != EvidenceSynthetic {
		t.Fatalf("evidence = %s, want synthetic: c says it is enginesim", got)
	}
	if got := evidence(ids[:2]); got != EvidenceReal {
		t.Fatalf("evidence = %s, want real", got)
	}
	declared := map[string]string{v1alpha1.AnnotationEngine: "vllm", v1alpha1.AnnotationEngineVersion: "0.11.0",
		v1alpha1.AnnotationEngineImage: "r/vllm@sha256:abc"}
	if c := provenanceCheck(declared, ids[:2]); !c.Pass {
		t.Fatalf("provenance = %+v, want pass: a reports the declared version, b none", c)
	}
	if c := provenanceCheck(declared, ids); c.Pass || !strings.Contains(c.Detail, `member c reports version "0.10.2"`) {
		t.Fatalf("provenance = %+v, want c's version mismatch", c)
	}
	delete(declared, v1alpha1.AnnotationEngineImage)
	declared[v1alpha1.AnnotationEngine] = "triton"
	if c := provenanceCheck(declared, nil); c.Pass || !strings.Contains(c.Detail, "missing "+v1alpha1.AnnotationEngineImage) ||
		!strings.Contains(c.Detail, `"triton"`) {
		t.Fatalf("provenance = %+v, want the missing image and the unknown engine", c)
	}
}

func TestSameQuiesce(t *testing.T) {
	none := v1alpha1.QuiesceSpec{}
	empty := v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{}}
	one := v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu0": "x"}}
	other := v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu0": "y"}}
	if !sameQuiesce(none, empty) || sameQuiesce(none, one) || sameQuiesce(one, other) || !sameQuiesce(one, one) ||
		sameQuiesce(none, v1alpha1.QuiesceSpec{Tier: "t"}) {
		t.Fatal("sameQuiesce disagrees with the intents' meaning")
	}
}

func TestNewPhaseAndChecks(t *testing.T) {
	ok := &loadgen.Result{Sent: 10, Succeeded: 10, Elapsed: time.Second, HeaderCounts: map[string]int{"gpu0": 6, "gpu1": 4}}
	bad := &loadgen.Result{Sent: 5, Succeeded: 3, Elapsed: 2 * time.Second, Statuses: map[int]int{500: 2, 200: 3},
		Errors: map[loadgen.ErrorKind]int{loadgen.ErrorStatus: 2}}
	direct := newPhase("direct", "members", 4, time.Second, map[string]*loadgen.Result{"gpu0": ok, "gpu1": bad})
	if direct.Sent != 15 || direct.Failed != 2 || direct.Members["gpu0"] != 10 || direct.Members["gpu1"] != 3 || direct.Statuses["500"] != 2 {
		t.Fatalf("direct phase = %+v", direct)
	}
	if c := zeroFailures("direct", direct); c.Pass || !strings.Contains(c.Detail, "2 of 15 requests failed (status: 2)") {
		t.Fatalf("check = %+v", c)
	}
	routed := newPhase("routed", "router", 4, time.Second, map[string]*loadgen.Result{"": ok})
	if routed.Members["gpu0"] != 6 || routed.Members["gpu1"] != 4 || routed.Throughput != 10 {
		t.Fatalf("routed phase = %+v", routed)
	}
	if c := zeroFailures("routed", routed); !c.Pass {
		t.Fatalf("check = %+v", c)
	}
	if c := zeroFailures("sustained", Phase{Error: "boom"}); c.Pass {
		t.Fatal("a phase that did not run passed")
	}
	if c := zeroFailures("sustained", Phase{}); c.Pass {
		t.Fatal("a phase that sent nothing passed")
	}
	l := latency([]time.Duration{4 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond})
	if l.Count != 4 || l.P50 != 2 || l.P99 != 4 || l.Max != 4 {
		t.Fatalf("latency = %+v", l)
	}
}

func TestReportFilesAndPromotion(t *testing.T) {
	r := &Report{Tier: "inference/llama", Evidence: EvidenceReal, Members: []Member{{ID: "gpu0"}, {ID: "gpu1"}},
		Phases:     []Phase{{Name: "routed", Sent: 3, Succeeded: 3, Members: map[string]int{"gpu0": 2, "gpu1": 1}}},
		Checks:     []Check{pass("identity", "ok"), pass("routed", "ok")},
		FinishedAt: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}
	r.judge()
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	digest, err := reportDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(dir, SummaryFile)) //nolint:gosec // the test's own directory.
	if err != nil {
		t.Fatal(err)
	}
	wantCmd := `kubectl annotate replicatier -n inference llama qualify.sluice.dev/accepted="<who>:` + digest + `:2026-12-03"`
	if !strings.Contains(string(sum), "Verdict: PASS") || !strings.Contains(string(sum), wantCmd) {
		t.Fatalf("summary lacks the verdict or the promotion command %q:\n%s", wantCmd, sum)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, ChartFile)); err != nil || !strings.Contains(string(svg), "Share of requests by member") { //nolint:gosec // the test's own directory.
		t.Fatalf("chart: %v\n%s", err, svg)
	}

	r.Checks = append(r.Checks, fail("drain", "no"))
	r.judge()
	var b strings.Builder
	if err := r.WriteSummary(&b, sha256.Sum256(nil)); err != nil {
		t.Fatal(err)
	}
	if r.Passed() || !strings.Contains(b.String(), "FAIL  drain") || strings.Contains(b.String(), "kubectl annotate") {
		t.Fatalf("a failed verdict offered promotion or hid the failure:\n%s", b.String())
	}
	r.Checks = nil
	if r.judge(); r.Passed() {
		t.Fatal("a report without checks passed")
	}
}

// reportDigest returns the sha256 of dir's report.json, as the accepted
// annotation records it.
func reportDigest(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ReportFile)) //nolint:gosec // the test's own directory.
	if err != nil {
		return "", err
	}
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:]), nil
}

package envtest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/qualify"
)

// simEngine is an in-process enginesim serving one member on loopback.
type simEngine struct {
	srv *httptest.Server
	sim *enginesim.Server
}

// newSimEngine starts an enginesim serving model (and only it), with short
// latencies; mutate changes its configuration first.
func newSimEngine(model string, mutate func(*enginesim.Config)) *simEngine {
	cfg := enginesim.DefaultConfig()
	cfg.Model = model
	cfg.TTFTBase, cfg.TTFTPerSeq, cfg.ITLBase, cfg.ITLPerSeq = 5*time.Millisecond, 0, time.Millisecond, 0
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := enginesim.NewServer(cfg)
	Expect(err).NotTo(HaveOccurred())
	e := &simEngine{sim: sim, srv: httptest.NewServer(sim)}
	DeferCleanup(e.srv.Close)
	return e
}

// inference is the number of inference requests the engine received.
func (e *simEngine) inference() uint64 { return e.sim.Engine().State().TotalRequests }

var _ = Describe("Qualification", func() {
	var (
		ns, node string
		engines  []*simEngine
		r        *testRouter
		c        client.WithWatch
	)

	// qualifiedTier creates a three-member Capacity tier over engines, with
	// the provenance annotations, and waits until the router applies it and
	// reports every member Admitting.
	qualifiedTier := func(ctx context.Context) *sluicev1.ReplicaTier {
		t := &sluicev1.ReplicaTier{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qualified", Annotations: map[string]string{
				sluicev1.AnnotationEngine:        "vllm",
				sluicev1.AnnotationEngineVersion: "0.11.0",
				sluicev1.AnnotationEngineImage:   "registry.example/vllm@sha256:" + strings.Repeat("0", 64),
				sluicev1.AnnotationRecipe:        "--tensor-parallel-size 1",
			}},
			Spec: sluicev1.ReplicaTierSpec{
				NodeName: node, Aliases: []string{"qualify-" + ns}, ServedModel: servedModel,
				Strategy: sluicev1.StrategyCapacity,
			},
		}
		for i, e := range engines {
			t.Spec.Members = append(t.Spec.Members, sluicev1.Member{
				ID: []string{"gpu0", "gpu1", "gpu2"}[i], Endpoint: e.srv.URL, MaxConcurrency: ptr.To[int32](2)})
		}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(HavePrefix("applied=1/1 gpu0=Admitting/"))
		Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		return t
	}

	options := func(out string) qualify.Options {
		return qualify.Options{
			Namespace: ns, Name: "qualified", Client: c, RouterURL: r.front.URL, AdminURL: r.admin.URL, AdminToken: adminToken, OutDir: out,
			Duration: time.Second, Sustain: 4 * time.Second, DrainTimeout: routerTimeout, MaxTokens: 4,
		}
	}

	// current reads the tier.
	current := func(ctx context.Context) *sluicev1.ReplicaTier {
		t := &sluicev1.ReplicaTier{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "qualified"}, t)).To(Succeed())
		return t
	}

	// unchanged checks that nothing qualification may write changed: the
	// generation (every spec change), the spec, labels and annotations.
	// Status keeps moving under the manager and the router, so the
	// resourceVersion is not compared.
	unchanged := func(ctx context.Context, before *sluicev1.ReplicaTier) {
		after := current(ctx)
		Expect(after.Generation).To(Equal(before.Generation))
		Expect(after.Spec).To(Equal(before.Spec))
		Expect(after.Annotations).To(Equal(before.Annotations))
		Expect(after.Labels).To(Equal(before.Labels))
	}

	readReport := func(out string) qualify.Report {
		var rep qualify.Report
		b, err := os.ReadFile(filepath.Join(out, qualify.ReportFile)) //nolint:gosec // the spec's own directory.
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(b, &rep)).To(Succeed())
		for _, f := range []string{qualify.SummaryFile, qualify.ChartFile} {
			info, err := os.Stat(filepath.Join(out, f))
			Expect(err).NotTo(HaveOccurred())
			Expect(info.Size()).To(BeNumerically(">", 0), f)
		}
		return rep
	}

	checks := func(rep qualify.Report) map[string]bool {
		out := map[string]bool{}
		for _, ch := range rep.Checks {
			out[ch.Name] = ch.Pass
		}
		return out
	}

	BeforeEach(func(ctx context.Context) {
		saCfg := installRouterRBAC(ctx)
		ns = newNamespace(ctx)
		node = "node-" + ns
		r = startRouter(saCfg, node)
		var err error
		c, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
	})

	It("plans without changing anything or contacting an engine", func(ctx context.Context) {
		engines = []*simEngine{newSimEngine(servedModel, nil), newSimEngine(servedModel, nil), newSimEngine(servedModel, nil)}
		qualifiedTier(ctx)
		before := current(ctx)
		out := GinkgoT().TempDir()
		p, err := qualify.Prepare(ctx, options(out))
		Expect(err).NotTo(HaveOccurred())
		var plan strings.Builder
		Expect(p.Write(&plan)).To(Succeed())
		Expect(plan.String()).To(ContainSubstring("quiesce member gpu0"))
		Expect(plan.String()).To(ContainSubstring("Nothing has been changed"))

		unchanged(ctx, before)
		for _, e := range engines {
			Expect(e.inference()).To(BeZero())
		}
		_, err = os.Stat(filepath.Join(out, qualify.ReportFile))
		Expect(os.IsNotExist(err)).To(BeTrue(), "a plan writes no report")
	})

	It("qualifies a healthy tier, labels it synthetic and restores the quiesce intent", func(ctx context.Context) {
		engines = []*simEngine{newSimEngine(servedModel, nil), newSimEngine(servedModel, nil), newSimEngine(servedModel, nil)}
		qualifiedTier(ctx)
		out := GinkgoT().TempDir()
		p, err := qualify.Prepare(ctx, options(out))
		Expect(err).NotTo(HaveOccurred())
		rep, err := p.Execute(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Passed()).To(BeTrue(), "checks: %+v", rep.Checks)

		onDisk := readReport(out)
		Expect(onDisk.Verdict).To(Equal(qualify.VerdictPass))
		Expect(onDisk.Evidence).To(Equal(qualify.EvidenceSynthetic))
		Expect(checks(onDisk)).To(Equal(map[string]bool{"identity": true, "provenance": true, "direct": true,
			"routed": true, "drain": true, "sustained": true, "restore": true}))
		Expect(onDisk.Phases).To(HaveLen(3))
		for _, ph := range onDisk.Phases {
			Expect(ph.Failed).To(BeZero(), ph.Name)
			Expect(ph.Sent).To(BeNumerically(">", 0), ph.Name)
		}
		Expect(onDisk.Phases[1].Members).To(HaveKey("gpu0"))
		// The router's own decision summary, read with the admin token,
		// holds the run's routed requests for this tier.
		var decided struct {
			Records int            `json:"records"`
			Tiers   map[string]int `json:"tiers"`
		}
		Expect(json.Unmarshal(onDisk.DecisionSummary, &decided)).To(Succeed(), "%s", onDisk.DecisionSummary)
		Expect(decided.Records).To(BeNumerically(">", 0), "%s", onDisk.DecisionSummary)
		Expect(decided.Tiers[ns+"/qualified"]).To(BeNumerically(">=", min(onDisk.Phases[1].Sent, 4096)), "%s", onDisk.DecisionSummary)
		var actions []string
		for _, tr := range onDisk.Transitions {
			actions = append(actions, tr.Action)
		}
		Expect(actions).To(Equal([]string{"quiesce", "drain", "readmit"}))

		t := current(ctx)
		Expect(t.Spec.Quiesce == nil || (t.Spec.Quiesce.Tier == "" && len(t.Spec.Quiesce.Members) == 0)).To(BeTrue(),
			"quiesce intent left behind: %+v", t.Spec.Quiesce)
		Expect(t.Annotations).NotTo(HaveKey(sluicev1.AnnotationAccepted), "qualification never promotes")
		summary, err := os.ReadFile(filepath.Join(out, qualify.SummaryFile)) //nolint:gosec // the spec's own directory.
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("%s", summary)
		Expect(string(summary)).To(ContainSubstring("Synthetic evidence cannot promote a tier"))
	})

	It("fails the verdict, and sends no load, when a member serves another model", func(ctx context.Context) {
		engines = []*simEngine{newSimEngine(servedModel, nil), newSimEngine("other/model", nil), newSimEngine(servedModel, nil)}
		qualifiedTier(ctx)
		before := current(ctx)
		out := GinkgoT().TempDir()
		p, err := qualify.Prepare(ctx, options(out))
		Expect(err).NotTo(HaveOccurred())
		rep, err := p.Execute(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Passed()).To(BeFalse())

		onDisk := readReport(out)
		Expect(onDisk.Verdict).To(Equal(qualify.VerdictFail))
		Expect(checks(onDisk)).To(HaveKeyWithValue("identity", false))
		Expect(onDisk.Identities[1].ServesModel).To(BeFalse())
		for _, e := range engines {
			Expect(e.inference()).To(BeZero())
		}
		unchanged(ctx, before)
	})

	It("fails the verdict when routed requests fail during the drain, and still restores the intent", func(ctx context.Context) {
		failing := func(c *enginesim.Config) { c.ErrorRate = 1 }
		engines = []*simEngine{newSimEngine(servedModel, nil), newSimEngine(servedModel, nil), newSimEngine(servedModel, failing)}
		qualifiedTier(ctx)
		out := GinkgoT().TempDir()
		p, err := qualify.Prepare(ctx, options(out))
		Expect(err).NotTo(HaveOccurred())
		rep, err := p.Execute(ctx)
		Expect(err).NotTo(HaveOccurred())

		onDisk := readReport(out)
		Expect(onDisk.Verdict).To(Equal(qualify.VerdictFail))
		got := checks(onDisk)
		Expect(got).To(HaveKeyWithValue("sustained", false))
		Expect(got).To(HaveKeyWithValue("drain", true))
		Expect(got).To(HaveKeyWithValue("restore", true))
		Expect(onDisk.Phases[2].Failed).To(BeNumerically(">", 0))
		Expect(rep.Passed()).To(BeFalse())
		t := current(ctx)
		Expect(t.Spec.Quiesce == nil || len(t.Spec.Quiesce.Members) == 0).To(BeTrue(), "quiesce intent left behind: %+v", t.Spec.Quiesce)
	})

	It("refuses a tier with a quiesced member before changing anything", func(ctx context.Context) {
		engines = []*simEngine{newSimEngine(servedModel, nil), newSimEngine(servedModel, nil), newSimEngine(servedModel, nil)}
		t := qualifiedTier(ctx)
		Expect(mergePatchWith(ctx, k8sClient, t, `{"spec":{"quiesce":{"members":{"gpu1":"maintenance"}}}}`)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).Should(HavePrefix("applied=2/2"))
		_, err := qualify.Prepare(ctx, options(GinkgoT().TempDir()))
		Expect(err).To(MatchError(qualify.ErrNotQualifiable))
		Expect(err.Error()).To(ContainSubstring("gpu1"))
	})
})

package envtest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// Every spec here runs the router as its service account (config/router
// RBAC, by impersonation), on a node of its own, against the suite's API
// server and manager.
var _ = Describe("router with the kube source", func() {
	var (
		saCfg *rest.Config
		ns    string
		node  string
	)
	BeforeEach(func(ctx context.Context) {
		saCfg = installRouterRBAC(ctx)
		ns = newNamespace(ctx)
		node = "node-" + ns
	})

	It("routes an accepted Capacity tier and follows member quiesce without disturbing requests in flight", func(ctx context.Context) {
		gpu0, gpu1 := newTestEngine(), newTestEngine()
		t := capacityTier(ns, "llama", node, "llama-"+ns, gpu0, gpu1)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		r := startRouter(saCfg, node)
		alias := t.Spec.Aliases[0]

		By("routing to both members once the manager accepted generation 1")
		servedBy(r, alias, "gpu0", "gpu1")
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=1/1 gpu0=Admitting/true gpu1=Admitting/true"))
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 1)))

		By("holding a request in flight on gpu1")
		arrived, release := gpu1.holdNext()
		held := make(chan reply, 1)
		for {
			done := make(chan reply, 1)
			go func() {
				defer GinkgoRecover()
				done <- r.chat(alias)
			}()
			var landed bool
			select {
			case <-arrived:
				landed = true
				go func() { held <- <-done }()
			case rep := <-done:
				Expect(rep.status).To(Equal(http.StatusOK))
				Expect(rep.member).To(Equal("gpu0"))
			}
			if landed {
				break
			}
		}
		before := gpu1.requests()

		By("quiescing gpu1 with a merge patch: Draining while the request runs")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu1":"maintenance"}}}}`)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=2/2 gpu0=Admitting/true gpu1=Draining/true"))
		for range 10 {
			rep := r.chat(alias)
			Expect(rep.status).To(Equal(http.StatusOK))
			Expect(rep.member).To(Equal("gpu0"), "a new request reached the quiesced member")
		}
		Expect(gpu1.requests()).To(Equal(before))

		By("letting the request in flight finish normally: Drained")
		release()
		Eventually(held).WithTimeout(routerTimeout).Should(Receive(Equal(reply{status: http.StatusOK, member: "gpu1"})))
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=2/2 gpu0=Admitting/true gpu1=Drained/true"))
		Expect(gpu1.requests()).To(Equal(before))

		By("readmitting gpu1 by patching its key to null")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu1":null}}}}`)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=3/3 gpu0=Admitting/true gpu1=Admitting/true"))
		servedBy(r, alias, "gpu0", "gpu1")
		Expect(gpu1.requests()).To(BeNumerically(">", before))
	})

	It("keeps tier quiesce and member quiesce independent in both directions", func(ctx context.Context) {
		gpu0, gpu1 := newTestEngine(), newTestEngine()
		t := capacityTier(ns, "llama", node, "llama-"+ns, gpu0, gpu1)
		t.Spec.Quiesce = &sluicev1.QuiesceSpec{Members: map[string]sluicev1.QuiesceReason{"gpu1": "maintenance"}}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		r := startRouter(saCfg, node)
		alias := t.Spec.Aliases[0]
		servedBy(r, alias, "gpu0")
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=1/1 gpu0=Admitting/true gpu1=Drained/true"))

		By("quiescing the tier: nothing is admitted")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"tier":"upgrade"}}}`)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=2/2 gpu0=Drained/true gpu1=Drained/true"))
		Expect(r.chat(alias)).To(Equal(reply{status: http.StatusServiceUnavailable, code: "tier_quiesced"}))

		By("readmitting the tier leaves gpu1 quiesced")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"tier":null}}}`)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=3/3 gpu0=Admitting/true gpu1=Drained/true"))
		for range 6 {
			Expect(r.chat(alias)).To(Equal(reply{status: http.StatusOK, member: "gpu0"}))
		}

		By("readmitting gpu1 while the tier is quiesced leaves the tier quiesced")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"tier":"upgrade"}}}`)).To(Succeed())
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"members":{"gpu1":null}}}}`)).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=5/5 gpu0=Drained/true gpu1=Drained/true"))
		Expect(r.chat(alias)).To(Equal(reply{status: http.StatusServiceUnavailable, code: "tier_quiesced"}))
		Expect(gpu1.requests()).To(BeZero())

		By("readmitting the tier: both members admit")
		Expect(mergePatch(ctx, t, `{"spec":{"quiesce":{"tier":null}}}`)).To(Succeed())
		servedBy(r, alias, "gpu0", "gpu1")
	})

	It("refuses a generation naming a member off the node as Programmed=False ApplyFailed and keeps the previous one serving", func(ctx context.Context) {
		gpu0, gpu1 := newTestEngine(), newTestEngine()
		t := capacityTier(ns, "llama", node, "llama-"+ns, gpu0, gpu1)
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		r := startRouter(saCfg, node)
		alias := t.Spec.Aliases[0]
		servedBy(r, alias, "gpu0", "gpu1")
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 1)))

		By("moving gpu1 to an address of no interface of this host (192.0.2.0/24 is reserved for documentation)")
		members := func(gpu1Endpoint string) string {
			return fmt.Sprintf(`{"spec":{"members":[{"id":"gpu0","endpoint":%q,"maxConcurrency":4},{"id":"gpu1","endpoint":%q,"maxConcurrency":4}]}}`,
				gpu0.endpoint(), gpu1Endpoint)
		}
		Expect(mergePatch(ctx, t, members("http://192.0.2.1:8000"))).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonApplyFailed, 2)))
		cur := get(ctx, t)
		Expect(cur.Status.Router.AppliedGeneration).To(Equal(int64(1)))
		Expect(cur.Status.Router.ApplyError).To(Equal(&sluicev1.ApplyError{Generation: 2,
			Message: "router: tier cannot be applied: member gpu1: endpoint host is not loopback or an address of this node (spec.memberLocality: SameHost)"}))
		c := meta.FindStatusCondition(cur.Status.Conditions, string(sluicev1.ConditionProgrammed))
		Expect(c.Message).To(ContainSubstring("cannot apply generation 2 (it still applies generation 1)"))
		Expect(c.Message).To(ContainSubstring("spec.memberLocality: SameHost"))
		Expect(c.Message).NotTo(ContainSubstring("192.0.2.1"))
		Expect(r.logs.String()).NotTo(ContainSubstring("192.0.2.1"))

		By("fixing gpu1: the error is removed and generation 3 is programmed")
		Expect(mergePatch(ctx, t, members(gpu1.endpoint()))).To(Succeed())
		Eventually(condition(ctx, t, sluicev1.ConditionProgrammed)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonApplied, 3)))
		Expect(get(ctx, t).Status.Router.ApplyError).To(BeNil())
		servedBy(r, alias, "gpu0", "gpu1")
	})

	It("ignores tiers of other nodes", func(ctx context.Context) {
		gpu0, gpu1 := newTestEngine(), newTestEngine()
		mine := capacityTier(ns, "mine", node, "mine-"+ns, gpu0, gpu1)
		far := capacityTier(ns, "far", "far-"+node, "far-"+ns, gpu0, gpu1)
		Expect(k8sClient.Create(ctx, far)).To(Succeed())
		Expect(k8sClient.Create(ctx, mine)).To(Succeed())
		r := startRouter(saCfg, node)
		servedBy(r, "mine-"+ns, "gpu0", "gpu1")
		Eventually(condition(ctx, far, sluicev1.ConditionAccepted)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		Consistently(func() reply { return r.chat("far-" + ns) }).WithTimeout(quietPeriod).
			Should(Equal(reply{status: http.StatusNotFound, code: "model_not_found"}))
		Expect(get(ctx, far).Status.Router).To(BeNil(), "the router reported on another node's tier")
	})

	It("applies only generations the manager accepted and keeps the last applied one", func(ctx context.Context) {
		a0, a1, b0, b1, c0, c1 := newTestEngine(), newTestEngine(), newTestEngine(), newTestEngine(), newTestEngine(), newTestEngine()
		shared := "shared-" + ns
		older := capacityTier(ns, "older", node, shared, a0, a1)
		Expect(k8sClient.Create(ctx, older)).To(Succeed())
		waitNextSecond(ctx, k8sClient, older)
		keeps := capacityTier(ns, "keeps", node, "keeps-"+ns, c0, c1)
		Expect(k8sClient.Create(ctx, keeps)).To(Succeed())
		newer := capacityTier(ns, "newer", node, shared, b0, b1)
		newer.Spec.Aliases = append(newer.Spec.Aliases, "newer-"+ns)
		Expect(k8sClient.Create(ctx, newer)).To(Succeed())
		Eventually(condition(ctx, newer, sluicev1.ConditionAccepted)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonAliasConflict, 1)))
		r := startRouter(saCfg, node)

		By("never applying a tier the manager rejected")
		servedBy(r, shared, "gpu0", "gpu1")
		servedBy(r, "keeps-"+ns, "gpu0", "gpu1")
		Consistently(func() reply { return r.chat("newer-" + ns) }).WithTimeout(quietPeriod).
			Should(Equal(reply{status: http.StatusNotFound, code: "model_not_found"}))
		Expect(b0.requests() + b1.requests()).To(BeZero())
		Expect(get(ctx, newer).Status.Router).To(BeNil())

		By("keeping generation 1 of a tier whose generation 2 is rejected")
		Eventually(routerStatus(ctx, k8sClient, keeps)).WithTimeout(routerTimeout).Should(HavePrefix("applied=1/1 "))
		Expect(mergePatch(ctx, keeps, fmt.Sprintf(`{"spec":{"aliases":["keeps-%s","%s"],"quiesce":{"members":{"gpu1":"maintenance"}}}}`, ns, shared))).To(Succeed())
		Eventually(condition(ctx, keeps, sluicev1.ConditionAccepted)).WithTimeout(routerTimeout).
			Should(Equal(want(metav1.ConditionFalse, sluicev1.ReasonAliasConflict, 2)))
		before := c1.requests()
		Consistently(func(g Gomega) {
			g.Expect(routerStatus(ctx, k8sClient, keeps)()).To(HavePrefix("applied=1/2 "))
		}).WithTimeout(quietPeriod).Should(Succeed())
		// Generation 1 has no quiesce: gpu1 still takes requests, and the
		// shared alias still goes to the older tier.
		servedBy(r, "keeps-"+ns, "gpu0", "gpu1")
		Expect(c1.requests()).To(BeNumerically(">", before))
		olderBefore, keepsBefore := a0.requests()+a1.requests(), c0.requests()+c1.requests()
		for range 4 {
			Expect(r.chat(shared).status).To(Equal(http.StatusOK))
		}
		Expect(a0.requests() + a1.requests()).To(Equal(olderBefore + 4))
		Expect(c0.requests() + c1.requests()).To(Equal(keepsBefore))

		By("applying generation 3 once it is accepted")
		Expect(mergePatch(ctx, keeps, fmt.Sprintf(`{"spec":{"aliases":["keeps-%s"]}}`, ns))).To(Succeed())
		Eventually(routerStatus(ctx, k8sClient, keeps)).WithTimeout(routerTimeout).
			Should(Equal("applied=3/3 gpu0=Admitting/true gpu1=Drained/true"))
	})

	It("restores member and tier quiesce after a restart before serving a request", func(ctx context.Context) {
		m0, m1, t0, t1 := newTestEngine(), newTestEngine(), newTestEngine(), newTestEngine()
		member := capacityTier(ns, "member-q", node, "member-q-"+ns, m0, m1)
		member.Spec.Quiesce = &sluicev1.QuiesceSpec{Members: map[string]sluicev1.QuiesceReason{"gpu1": "maintenance"}}
		tier := capacityTier(ns, "tier-q", node, "tier-q-"+ns, t0, t1)
		tier.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: "maintenance"}
		Expect(k8sClient.Create(ctx, member)).To(Succeed())
		Expect(k8sClient.Create(ctx, tier)).To(Succeed())

		first := startRouter(saCfg, node)
		servedBy(first, "member-q-"+ns, "gpu0")
		Eventually(routerStatus(ctx, k8sClient, tier)).WithTimeout(routerTimeout).
			Should(Equal("applied=1/1 gpu0=Drained/true gpu1=Drained/true"))
		first.stop()

		By("sending requests to a new router from its first moment")
		second := startRouter(saCfg, node)
		codes := map[string]int{}
		Eventually(func(g Gomega) {
			m := second.chat("member-q-" + ns)
			Expect(m.member).NotTo(Equal("gpu1"), "a request reached the quiesced member")
			codes[fmt.Sprintf("member %d %s %s", m.status, m.code, m.member)]++
			tq := second.chat("tier-q-" + ns)
			Expect(tq.status).To(BeElementOf(http.StatusNotFound, http.StatusServiceUnavailable), "a request passed the quiesced tier")
			Expect(tq.code).To(BeElementOf("model_not_found", "tier_quiesced"))
			codes[fmt.Sprintf("tier %d %s", tq.status, tq.code)]++
			g.Expect(codes["member 200  gpu0"]).To(BeNumerically(">=", 5))
			g.Expect(codes["tier 503 tier_quiesced"]).To(BeNumerically(">=", 5))
		}).WithTimeout(routerTimeout).WithPolling(10 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("answers of the restarted router: %v\n", codes)
		Expect(m1.requests()).To(BeZero())
		Expect(t0.requests() + t1.requests()).To(BeZero())
	})
})

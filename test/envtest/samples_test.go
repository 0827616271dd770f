package envtest

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

var _ = Describe("config/samples", func() {
	It("apply cleanly and are accepted", func(ctx context.Context) {
		files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var tiers []*sluicev1.ReplicaTier
		for _, f := range files {
			raw, err := os.ReadFile(f) //nolint:gosec // test reads the repository's own samples.
			Expect(err).NotTo(HaveOccurred())
			t := &sluicev1.ReplicaTier{}
			Expect(yaml.UnmarshalStrict(raw, t)).To(Succeed(), f)
			Expect(sluicev1.Validate(t)).To(BeEmpty(), f)
			t.Namespace = newNamespace(ctx)
			Expect(k8sClient.Create(ctx, t)).To(Succeed(), f)
			// The samples claim their aliases on gpu-node-1; free them for
			// other specs that apply the samples too.
			DeferCleanup(func(ctx context.Context) {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, t))).To(Succeed())
			})
			tiers = append(tiers, t)
		}
		Expect(tiers).To(HaveLen(3))
		strategies := map[sluicev1.Strategy]int{}
		queued := 0
		for _, t := range tiers {
			strategies[t.Spec.EffectiveStrategy()]++
			if t.Spec.Queue != nil {
				queued++
			}
			Eventually(condition(ctx, t, sluicev1.ConditionAccepted)).Should(Equal(want(metav1.ConditionTrue, sluicev1.ReasonAccepted, 1)))
		}
		Expect(strategies).To(Equal(map[sluicev1.Strategy]int{sluicev1.StrategyCapacity: 1, sluicev1.StrategyRoundRobin: 1, "": 1}))
		Expect(queued).To(Equal(1), "one sample declares an admission queue")
	})
})

package envtest

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

// The validation table runs against the API server here, once as a create
// and once as an update of a valid object, and against v1alpha1.Validate;
// all three must agree on every row.
// validationNode is the node of every validation row's tiers.
const validationNode = "validation-node"

var _ = Describe("ReplicaTier validation", func() {
	const ns = "validation"
	BeforeEach(func(ctx context.Context) {
		err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	})

	// A Go object cannot carry a malformed duration, so the table cannot
	// either: this one is sent as JSON. The files source refuses it when
	// decoding (TestParseManifest in internal/source).
	It("refuses a queue maxWait that is not a duration", func(ctx context.Context) {
		obj := validationtable.Base()
		obj.Namespace, obj.Name = ns, "malformed-wait"
		obj.Spec.NodeName = validationNode
		obj.APIVersion, obj.Kind = sluicev1.GroupVersion.String(), "ReplicaTier"
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: raw}
		Expect(unstructured.SetNestedMap(u.Object, map[string]any{"maxRequests": int64(8), "maxWait": "soon"}, "spec", "queue")).To(Succeed())
		err = k8sClient.Create(ctx, u)
		Expect(err).To(HaveOccurred(), "API server accepted maxWait: soon")
		Expect(err.Error()).To(ContainSubstring("spec.queue.maxWait"))
		Expect(err.Error()).To(ContainSubstring("maxWait must be between 10ms and 10m"))
	})

	for i, row := range validationtable.Rows() {
		It(fmt.Sprintf("agrees with the Go function: %s", row.Desc), func(ctx context.Context) {
			obj := validationtable.Base()
			obj.Namespace = ns
			obj.Name = fmt.Sprintf("row-%d", i)
			// A node of its own keeps the rows' aliases from contesting
			// the aliases of other specs' tiers.
			obj.Spec.NodeName = validationNode
			row.Mutate(obj)

			goErrs := sluicev1.Validate(obj).ToAggregate()
			createErr := k8sClient.Create(ctx, obj.DeepCopy())

			base := validationtable.Base()
			base.Namespace = ns
			base.Name = fmt.Sprintf("row-%d-update", i)
			base.Spec.NodeName = validationNode
			Expect(k8sClient.Create(ctx, base)).To(Succeed())
			// The manager patches the new object's status concurrently, so
			// the update retries on a resourceVersion conflict.
			updateErr := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				updated := &sluicev1.ReplicaTier{}
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(base), updated); err != nil {
					return err
				}
				updated.Spec = *obj.Spec.DeepCopy()
				return k8sClient.Update(ctx, updated)
			})

			if len(row.WantErrors) == 0 {
				Expect(goErrs).NotTo(HaveOccurred())
				Expect(createErr).NotTo(HaveOccurred())
				Expect(updateErr).NotTo(HaveOccurred())
				return
			}
			Expect(goErrs).To(HaveOccurred(), "Go validation accepted an object the table rejects")
			Expect(createErr).To(HaveOccurred(), "API server accepted the create")
			Expect(updateErr).To(HaveOccurred(), "API server accepted the update")
			for _, want := range row.WantErrors {
				Expect(goErrs.Error()).To(ContainSubstring(want), "Go validation")
				Expect(createErr.Error()).To(ContainSubstring(want), "API server create")
				Expect(updateErr.Error()).To(ContainSubstring(want), "API server update")
			}
		})
	}
})

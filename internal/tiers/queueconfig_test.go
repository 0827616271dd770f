package tiers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// withQueue sets the tier's spec.queue; perTenant zero leaves the tenant
// share absent.
func withQueue(maxRequests int32, maxWait time.Duration, perTenant int32) func(*v1alpha1.ReplicaTierSpec) {
	return func(s *v1alpha1.ReplicaTierSpec) {
		s.Queue = &v1alpha1.QueueSpec{MaxRequests: maxRequests, MaxWait: &metav1.Duration{Duration: maxWait}}
		if perTenant != 0 {
			s.Queue.MaxRequestsPerTenant = &perTenant
		}
	}
}

// TestNewTierConfigQueue proves spec.queue becomes the admission
// configuration's Queue, field for field, and that a tier without one gets
// no queue.
func TestNewTierConfigQueue(t *testing.T) {
	members := []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:8001", Max: 2}, {ID: "gpu1", Endpoint: "http://127.0.0.1:8002", Max: 2}}
	for _, tc := range []struct {
		desc   string
		mutate []func(*v1alpha1.ReplicaTierSpec)
		want   *admission.Queue
	}{
		{desc: "no queue"},
		{desc: "every field", mutate: []func(*v1alpha1.ReplicaTierSpec){withQueue(64, 90*time.Second, 16)},
			want: &admission.Queue{MaxRequests: 64, MaxWait: 90 * time.Second, MaxRequestsPerTenant: 16}},
		{desc: "no tenant share", mutate: []func(*v1alpha1.ReplicaTierSpec){withQueue(10000, 10*time.Millisecond, 0)},
			want: &admission.Queue{MaxRequests: 10000, MaxWait: 10 * time.Millisecond}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tier := sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity, members, tc.mutate...)
			_, acfg, _, err := newTierConfig(tier, &hostAddrSet{})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && acfg.Queue != nil:
				t.Fatalf("Queue = %+v, want none", *acfg.Queue)
			case tc.want != nil && (acfg.Queue == nil || *acfg.Queue != *tc.want):
				t.Fatalf("Queue = %+v, want %+v", acfg.Queue, *tc.want)
			}
			if _, err := admission.New(acfg); err != nil {
				t.Fatalf("admission refuses the converted configuration: %v", err)
			}
		})
	}
}

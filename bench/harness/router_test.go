//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// TestTierManifestQueue decodes the harness's tier manifests the way the
// files source does (strict YAML, then the API's validation): the queue the
// late binding and two-tenant scenarios write is the one the router reads.
func TestTierManifestQueue(t *testing.T) {
	engines := []*engine{{addr: "127.0.0.1:1"}, {addr: "127.0.0.1:2"}}
	for _, tc := range []struct {
		name      string
		queue     *queueSpec
		wantQueue string
	}{
		{name: "no queue"},
		{name: "queue", queue: &queueSpec{MaxRequests: 1000, MaxWait: time.Minute}, wantQueue: "1000 1m0s <nil>"},
		{name: "queue with a tenant share", queue: &queueSpec{MaxRequests: 64, MaxWait: 30 * time.Second, MaxPerTenant: 32}, wantQueue: "64 30s 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tierSpec{Name: "lq", Alias: aliasLateQueue, Strategy: "Capacity", Ceiling: 8, Engines: engines, Queue: tc.queue}
			var tier v1alpha1.ReplicaTier
			if err := yaml.UnmarshalStrict([]byte(spec.manifest()), &tier); err != nil {
				t.Fatalf("%v\n%s", err, spec.manifest())
			}
			v1alpha1.Default(&tier)
			if errs := v1alpha1.Validate(&tier); len(errs) > 0 {
				t.Fatalf("invalid tier: %v\n%s", errs, spec.manifest())
			}
			q := tier.Spec.Queue
			if tc.queue == nil {
				if q != nil || strings.Contains(spec.manifest(), "queue") {
					t.Fatalf("a tier without a queue got %+v", q)
				}
				return
			}
			per := "<nil>"
			if q.MaxRequestsPerTenant != nil {
				per = fmt.Sprint(*q.MaxRequestsPerTenant)
			}
			if got := fmt.Sprint(q.MaxRequests, " ", q.MaxWait.Duration, " ", per); got != tc.wantQueue {
				t.Fatalf("queue = %s, want %s", got, tc.wantQueue)
			}
		})
	}
}

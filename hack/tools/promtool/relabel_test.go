package promtool

import (
	"os"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
)

// podMonitorFile is the routers' PodMonitor, from this module's directory.
const podMonitorFile = "../../../config/prometheus/router_podmonitor.yaml"

// podMonitor is the part of a PodMonitor the test reads.
type podMonitor struct {
	Spec struct {
		PodMetricsEndpoints []struct {
			Relabelings []map[string]any `yaml:"relabelings"`
		} `yaml:"podMetricsEndpoints"`
	} `yaml:"spec"`
}

// relabelConfigs reads the PodMonitor's relabelings as Prometheus' relabel
// configurations: the Prometheus Operator copies them into the scrape
// configuration with their camelCase keys in snake_case.
func relabelConfigs(t *testing.T) []*relabel.Config {
	t.Helper()
	raw, err := os.ReadFile(podMonitorFile)
	if err != nil {
		t.Fatal(err)
	}
	var pm podMonitor
	if err := yaml.Unmarshal(raw, &pm); err != nil {
		t.Fatalf("%s: %v", podMonitorFile, err)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", podMonitorFile, len(pm.Spec.PodMetricsEndpoints))
	}
	snake := map[string]string{"sourceLabels": "source_labels", "targetLabel": "target_label"}
	var out []*relabel.Config
	for _, r := range pm.Spec.PodMetricsEndpoints[0].Relabelings {
		m := map[string]any{}
		for k, v := range r {
			if s, ok := snake[k]; ok {
				k = s
			}
			m[k] = v
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		c := &relabel.Config{}
		if err := yaml.UnmarshalStrict(b, c); err != nil {
			t.Fatalf("relabeling %v: %v", r, err)
		}
		if err := c.Validate(model.UTF8Validation); err != nil {
			t.Fatalf("relabeling %v: %v", r, err)
		}
		out = append(out, c)
	}
	return out
}

// TestRouterPodMonitorTarget: Prometheus' pod discovery makes one target
// without a port for a container that declares none (the router, on the
// host network); the PodMonitor's relabelings turn it into the pod's IP,
// which is the node's, on the admin port 9090, and label it with the job
// the rules select and the pod's node.
func TestRouterPodMonitorTarget(t *testing.T) {
	cfgs := relabelConfigs(t)
	for _, tc := range []struct{ podIP, want string }{
		{"10.0.0.7", "10.0.0.7:9090"},
		{"fd00::7", "[fd00::7]:9090"},
	} {
		discovered := labels.FromStrings(
			model.AddressLabel, tc.podIP,
			"__meta_kubernetes_pod_ip", tc.podIP,
			"__meta_kubernetes_pod_node_name", "gpu-node-1",
			model.JobLabel, "podMonitor/sluice-router/sluice-router/0",
		)
		lb := labels.NewBuilder(discovered)
		keep := relabel.ProcessBuilder(lb, cfgs...)
		got := lb.Labels()
		if !keep {
			t.Fatalf("pod IP %s: the target was dropped", tc.podIP)
		}
		if a := got.Get(model.AddressLabel); a != tc.want {
			t.Errorf("pod IP %s: address %q, want %q", tc.podIP, a, tc.want)
		}
		if j, n := got.Get(model.JobLabel), got.Get("node"); j != "sluice-router" || n != "gpu-node-1" {
			t.Errorf("pod IP %s: job %q, node %q", tc.podIP, j, n)
		}
	}
}

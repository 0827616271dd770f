//go:build gie

package gie

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/testproc"
)

// The InferencePool and its pods.
const (
	// poolCRDFile is the InferencePool CRD's file among the module's
	// manifests (hack/gie/build.sh copies it next to the picker).
	poolCRDFile = "inference.networking.k8s.io_inferencepools.yaml"
	// poolNamespace and poolName name the InferencePool; its pods are in
	// the same namespace.
	poolNamespace, poolName = "gie", "sluice-llm"
	// poolLabel is the label the pool selects its pods by, with poolApp.
	poolLabel, poolApp = "app", "sluice-router"
	// pickerServiceName is the pool's endpointPickerRef: the picker's
	// Service as a gateway would reach it. The test's gateway dials the
	// picker directly.
	pickerServiceName = "sluice-llm-epp"
)

// The picker's ports, on every interface of the test's namespace.
const (
	// pickerGRPCPort serves ext-proc.
	pickerGRPCPort = 9002
	// pickerHealthPort serves gRPC health.
	pickerHealthPort = 9003
	// pickerMetricsPort serves the picker's own /metrics, whose per-pod
	// series show which pods it holds and the queue it read for each.
	pickerMetricsPort = 9090
)

// pickerConfig is the picker's EndpointPickerConfig: the queue and
// KV-cache scorers (GIE's default weights, 2 each) and a max-score
// picker, fed by the metrics data source reading each pod's /metrics for
// GIE's vLLM names, restated without the LoRA and cache-info series, which
// a router does not serve. The pods' metrics port is the command line's
// (--model-server-metrics-port); the path is the data source's parameter,
// which replaces the deprecated --model-server-metrics-path.
const pickerConfig = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- type: metrics-data-source
  parameters:
    scheme: http
    path: /metrics
- type: core-metrics-extractor
  parameters:
    engineConfigs:
    - name: vllm
      queuedRequestsSpec: "vllm:num_requests_waiting"
      runningRequestsSpec: "vllm:num_requests_running"
      kvUsageSpec: "vllm:kv_cache_usage_perc"
      loraSpec: ""
      cacheInfoSpec: ""
dataLayer:
  sources:
  - pluginRef: metrics-data-source
    extractors:
    - pluginRef: core-metrics-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
`

// cluster is the control plane with the InferencePool CRD, the pool's
// objects and the picker.
type cluster struct {
	k8s        client.Client
	kubeconfig string
	picker     *supervise.Process
}

// startControlPlane starts the envtest API server with GIE's
// InferencePool CRD, and an admin user whose kubeconfig the picker uses.
// It stops when the test ends.
func startControlPlane(t *testing.T) *cluster {
	t.Helper()
	// The namespace has no default route, from which the API server
	// would take the address it advertises: it advertises loopback, which
	// it accepts without the `kubernetes` Service's endpoint reconciler
	// (nothing here reaches the API server through that Service).
	apiServer := &envtest.APIServer{}
	apiServer.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	env := &envtest.Environment{
		BinaryAssetsDirectory: bins.assets,
		ControlPlane:          envtest.ControlPlane{APIServer: apiServer},
		CRDDirectoryPaths:     []string{bins.crdDir},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := &cluster{}
	if c.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	admin, err := env.AddUser(envtest.User{Name: "gie-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNamespace}}
	if err := c.k8s.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return c
}

// addPod creates the node's Pod, labelled for the pool, and sets its
// status through the status subresource as a kubelet would: running, the
// node's address as its IP, Ready.
func (c *cluster) addPod(t *testing.T, n *node) {
	t.Helper()
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: n.spec.name, Namespace: poolNamespace, Labels: map[string]string{poolLabel: poolApp}},
		Spec: corev1.PodSpec{NodeName: n.spec.name, Containers: []corev1.Container{{
			Name: "router", Image: "sluice-router",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: frontPort}, {Name: "admin", ContainerPort: adminPort}},
		}}},
	}
	if err := c.k8s.Create(ctx, pod); err != nil {
		t.Fatalf("create pod %s: %v", n.spec.name, err)
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: n.spec.ip, PodIPs: []corev1.PodIP{{IP: n.spec.ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if err := c.k8s.Status().Update(ctx, pod); err != nil {
		t.Fatalf("pod %s status: %v", n.spec.name, err)
	}
}

// setReady sets the node's Pod's Ready condition through the status
// subresource, as a kubelet does when the pod's readiness probe changes.
func (c *cluster) setReady(t *testing.T, n *node, ready bool) {
	t.Helper()
	if err := c.updateReady(t.Context(), n, ready); err != nil {
		t.Fatal(err)
	}
}

// updateReady is setReady returning its error, for a goroutine of the test.
func (c *cluster) updateReady(ctx context.Context, n *node, ready bool) error {
	pod := &corev1.Pod{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: poolNamespace, Name: n.spec.name}, pod); err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := c.k8s.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod %s status: %w", n.spec.name, err)
	}
	return nil
}

// addPool creates the InferencePool (inference.networking.k8s.io/v1):
// the pods labelled poolLabel=poolApp, the routers' front door as the
// target port, the picker as its endpoint picker. The project does not
// import GIE's Go types (their Kubernetes libraries are another minor
// version), so the object is unstructured.
func (c *cluster) addPool(t *testing.T) {
	t.Helper()
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1",
		"kind":       "InferencePool",
		"metadata":   map[string]any{"name": poolName, "namespace": poolNamespace},
		"spec": map[string]any{
			"selector":    map[string]any{"matchLabels": map[string]any{poolLabel: poolApp}},
			"targetPorts": []any{map[string]any{"number": int64(frontPort)}},
			"endpointPickerRef": map[string]any{
				"name": pickerServiceName,
				"port": map[string]any{"number": int64(pickerGRPCPort)},
			},
		},
	}}
	if err := c.k8s.Create(t.Context(), pool); err != nil {
		t.Fatalf("create InferencePool: %v", err)
	}
}

// startPicker starts GIE's endpoint picker for the pool, with the
// admin kubeconfig, pickerConfig and the routers' admin port as the
// pods' metrics port, then waits until it is serving and holds every
// node's pod. Plain gRPC and an open metrics endpoint: everything is on
// the test's own namespace. It stops when the test ends.
func (c *cluster) startPicker(t *testing.T, nodes []*node) {
	t.Helper()
	// The picker reads its kubeconfig the way controller-runtime does;
	// its command line has no --kubeconfig.
	t.Setenv("KUBECONFIG", c.kubeconfig)
	args := []string{
		"--pool-name", poolName, "--pool-namespace", poolNamespace,
		"--grpc-port", strconv.Itoa(pickerGRPCPort),
		"--grpc-health-port", strconv.Itoa(pickerHealthPort),
		"--metrics-port", strconv.Itoa(pickerMetricsPort),
		"--model-server-metrics-port", strconv.Itoa(adminPort),
		"--secure-serving=false", "--metrics-endpoint-auth=false",
		"--enable-pprof=false", "--tracing=false",
		"--config-text", pickerConfig,
	}
	c.picker = testproc.Start(t, t, "picker", bins.picker, args, nil)
	eventually(t, "the picker holds every node's pod", func() (bool, string) {
		select {
		case <-c.picker.Exited():
			t.Fatalf("the picker exited: %v", c.picker.ExitErr())
		default:
		}
		pods, err := pickerPods()
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if _, ok := pods[n.spec.name]; !ok {
				return false, fmt.Sprintf("pods %v", pods)
			}
		}
		return true, ""
	})
}

// pickerPods reads the picker's own /metrics: each pod it holds, with the
// queue it last read from that pod's /metrics
// (inference_pool_per_pod_queue_size).
func pickerPods() (map[string]float64, error) {
	body, err := get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(pickerMetricsPort)) + "/metrics")
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	pods := map[string]float64{}
	for _, m := range families["inference_pool_per_pod_queue_size"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "model_server_pod" {
				// The picker holds an endpoint per pod and target port,
				// named POD-rank-N; the pool has one target port.
				pod, _, _ := strings.Cut(l.GetValue(), "-rank-")
				pods[pod] = m.GetGauge().GetValue()
			}
		}
	}
	return pods, nil
}

// get GETs url and returns its body, at most maxBody bytes.
func get(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return b, nil
}

package monitoring

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/test/testproc"
)

// Names of the router's test tier.
const (
	nodeName    = "monitoring-node"
	servedModel = "monitoring/llm"
	tierAlias   = "llm"
	// tierKey is the tier's namespace/name, the tier label's value.
	tierKey = "default/llm"
)

// exposition is a scrape: metric family name to family.
type exposition map[string]*dto.MetricFamily

// get GETs url and returns the status and body.
func get(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// scrape GETs url's Prometheus text exposition and parses it.
func scrape(ctx context.Context, url string) (exposition, error) {
	status, body, err := get(ctx, url)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return families, nil
}

// seriesNames returns the names of the series a family exposes: a
// histogram's _bucket, _sum and _count, a summary's quantiles (its own
// name), _sum and _count, and every other family's own name.
func (e exposition) seriesNames() map[string]bool {
	out := map[string]bool{}
	for name, f := range e {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// hasSample reports whether family name has a series with the labels of
// want and, when value is not nil, that value (gauges and counters).
func (e exposition) hasSample(name string, want map[string]string, value *float64) bool {
	f := e[name]
	if f == nil {
		return false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		if value == nil {
			return true
		}
		switch {
		case m.GetGauge() != nil && m.GetGauge().GetValue() == *value,
			m.GetCounter() != nil && m.GetCounter().GetValue() == *value:
			return true
		}
	}
	return false
}

// startRouter starts an engine simulator and a router with a Capacity tier
// of two members on it (with metrics, so their pressure is fetched) and a
// decision log file, waits until both members are ready, sends streamed
// and unstreamed chat completions through the router, and returns the
// router's admin address once its request histograms have series.
func startRouter(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	var engineAddr string
	testproc.Start(t, t, "enginesim", bins["enginesim"], []string{"--listen", "127.0.0.1:0", "--model", servedModel,
		"--ttft-base", "5ms", "--ttft-per-seq", "0s", "--itl-base", "1ms", "--itl-per-seq", "0s"},
		startlines.EngineAddr(&engineAddr))

	dir := t.TempDir()
	tiers := filepath.Join(dir, "tiers")
	if err := os.Mkdir(tiers, 0o700); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ReplicaTier
metadata: {name: llm, namespace: default}
spec:
  nodeName: %s
  aliases: [%s]
  servedModel: %s
  strategy: Capacity
  members:
  - {id: gpu0, endpoint: "http://%s", maxConcurrency: 4, metrics: {engine: vllm}}
  - {id: gpu1, endpoint: "http://%s", maxConcurrency: 4, metrics: {engine: vllm}}
`, nodeName, tierAlias, servedModel, engineAddr, engineAddr)
	if err := os.WriteFile(filepath.Join(tiers, "llm.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	var front, admin string
	testproc.Start(t, t, "router", bins["router"], []string{"--tiers-dir", tiers, "--node-name", nodeName,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--shutdown-grace", "0s",
		"--decision-log-file", filepath.Join(dir, "decisions.jsonl")},
		startlines.RouterAddrs(&front, &admin))
	metrics := "http://" + admin + "/metrics"
	one := 1.0
	eventually(t, "both members ready", func() (bool, string) {
		e, err := scrape(ctx, metrics)
		if err != nil {
			return false, err.Error()
		}
		for _, id := range []string{"gpu0", "gpu1"} {
			if !e.hasSample("sluice_member_ready", map[string]string{"tier": tierKey, "member": id}, &one) {
				return false, id + " not ready"
			}
		}
		return true, ""
	})

	for i, stream := range []bool{false, true, false, true} {
		body := fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":5,"messages":[{"role":"user","content":"hello %d"}]}`,
			tierAlias, stream, i)
		status, text, err := post(ctx, "http://"+front+"/v1/chat/completions", body)
		if err != nil || status != http.StatusOK {
			t.Fatalf("chat completion %d (stream %t): %d %v %.300s", i, stream, status, err, text)
		}
	}
	eventually(t, "the request histograms have series", func() (bool, string) {
		e, err := scrape(ctx, metrics)
		if err != nil {
			return false, err.Error()
		}
		for _, name := range []string{"sluice_upstream_first_byte_seconds", "sluice_schedule_duration_seconds"} {
			if e[name] == nil || len(e[name].GetMetric()) == 0 {
				return false, name + " has no series"
			}
		}
		return true, ""
	})
	return admin
}

// post POSTs a JSON body and returns the status and the body.
func post(ctx context.Context, url, body string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}

// assetsDir is where `make envtest-bins` puts kube-apiserver, etcd and
// kubectl, unless KUBEBUILDER_ASSETS names another directory.
func assetsDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	dir, err := filepath.Abs(filepath.Join(repoRoot, "bin", "k8s"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startManager starts an API server with the ReplicaTier CRD and the
// manager against it, with its metrics endpoint on a loopback port in
// plain HTTP (--metrics-secure=false: the test scrapes names, and
// test/install scrapes the secure endpoint), and returns that endpoint's
// address once the manager's controller has exported its reconcile
// counters.
func startManager(t *testing.T) string {
	t.Helper()
	assets := assetsDir(t)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Fatalf("%s missing in %s: run `make envtest-bins` or set KUBEBUILDER_ASSETS", bin, assets)
		}
	}
	// envtest logs through controller-runtime's logger; without one it
	// prints a warning with a stack trace.
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if _, err := env.Start(); err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "monitoring-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add admin user: %v", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	testproc.Start(t, t, "manager", bins["manager"], []string{"--metrics-bind-address=" + addr, "--metrics-secure=false",
		"--health-probe-bind-address=" + freeLoopbackAddr(t), "--kubeconfig=" + kubeconfig},
		func(line []byte) bool { return bytes.Contains(line, []byte(`"msg":"Serving metrics server"`)) })
	eventually(t, "the manager's reconcile counters", func() (bool, string) {
		e, err := scrape(t.Context(), "http://"+addr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		if !e.hasSample("controller_runtime_reconcile_total", map[string]string{"controller": "replicatier"}, nil) {
			return false, "no controller_runtime_reconcile_total of controller replicatier"
		}
		return true, ""
	})
	return addr
}

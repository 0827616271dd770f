package helm

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/test/gietest"
)

// The InferencePool example of docs/INSTALL.md#many-nodes, in both forms.
const (
	// pickerImage is that release's picker (cmd/epp).
	pickerImage = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
	// sluicePoolValues labels the routers for the pool (the sluice chart).
	sluicePoolValues = "charts/sluice/values-inferencepool.yaml"
	// giePoolValues are the values of GIE's inferencepool chart.
	giePoolValues = "charts/inferencepool-values.yaml"
	// pickerConfigFile is the picker's EndpointPickerConfig, which the
	// overlay mounts and giePoolValues carries.
	pickerConfigFile = "config/inferencepool/sluice-picker.yaml"
	// poolOverlay is the kustomize form, under config/.
	poolOverlay = "inferencepool"
	// poolName names the pool, and the Helm release of GIE's chart.
	poolName = "llama-70b"
	// poolSample is the tier whose servedModel the picker's label matchers
	// name.
	poolSample = "config/samples/capacity.yaml"
)

// TestInferencePoolExample renders both forms of the example, the sluice
// chart with sluicePoolValues beside GIE's own inferencepool chart (from
// its pinned module) with giePoolValues, and config/inferencepool, and
// checks in each that the pool selects the router pods, sends to the front
// door, and that the picker scrapes the router's admin port with the
// shared config. The two forms render the same pool and picker.
func TestInferencePoolExample(t *testing.T) {
	sluice := template(t, "--values", sluicePoolValues)
	ds, _ := routerContainer(t, sluice, "sluice-router")
	gie := templateGIE(t, ds.Namespace)
	overlay := renderKustomization(t, poolOverlay)

	t.Run("helm: the pool and the picker fit the chart's routers", func(t *testing.T) {
		checkPool(t, ds, gie)
	})
	t.Run("kustomize: the pool and the picker fit the overlay's routers", func(t *testing.T) {
		kds := typed[appsv1.DaemonSet](t, overlay, "DaemonSet", ds.Namespace, "sluice-router")
		checkPool(t, kds, overlay)
	})
	t.Run("kustomize: the overlay is config/default with the routers labelled", func(t *testing.T) {
		base := index(renderKustomization(t, "default"))
		added := 0
		for key, u := range index(overlay) {
			b := base[key]
			if b == nil {
				added++
				if u.GetNamespace() != ds.Namespace {
					t.Errorf("%s: added outside the routers' namespace", key)
				}
				continue
			}
			if u.GetKind() == "DaemonSet" {
				continue
			}
			if !equality.Semantic.DeepEqual(u.Object, b.Object) {
				t.Errorf("%s differs from config/default's", key)
			}
		}
		// The pool, and the picker's ServiceAccount, Role, RoleBinding,
		// ConfigMap, Deployment and Service.
		if added != 7 || len(overlay)-added != len(base) {
			t.Errorf("the overlay adds %d objects to config/default's %d and renders %d, want 7 added and all of config/default",
				added, len(base), len(overlay))
		}
		kds := typed[appsv1.DaemonSet](t, overlay, "DaemonSet", ds.Namespace, "sluice-router")
		bds := typed[appsv1.DaemonSet](t, renderKustomization(t, "default"), "DaemonSet", ds.Namespace, "sluice-router")
		cds, _ := routerContainer(t, template(t), ds.Namespace)
		if k, c := addedLabels(bds, kds), addedLabels(cds, ds); len(k) == 0 || !maps.Equal(k, c) {
			t.Errorf("router pod labels added: by config/%s %v, by %s %v; want the same", poolOverlay, k, sluicePoolValues, c)
		}
		kds.Spec.Template.Labels, bds.Spec.Template.Labels = nil, nil
		if !equality.Semantic.DeepEqual(kds.Spec, bds.Spec) {
			t.Error("the overlay changes the router DaemonSet beyond its pod labels")
		}
	})
	t.Run("the two forms render the same pool and picker", func(t *testing.T) {
		ns := ds.Namespace
		hp, kp := find(gie, "InferencePool", ns, poolName), find(overlay, "InferencePool", ns, poolName)
		if hp == nil || kp == nil || !equality.Semantic.DeepEqual(hp.Object["spec"], kp.Object["spec"]) {
			t.Errorf("InferencePool spec: GIE's chart\n%s\nconfig/%s\n%s", mustJSON(t, specOf(hp)), poolOverlay, mustJSON(t, specOf(kp)))
		}
		hc, kc := pickerContainer(t, gie, ns), pickerContainer(t, overlay, ns)
		if !slices.Equal(hc.Args, kc.Args) {
			t.Errorf("picker args: GIE's chart %q, config/%s %q", hc.Args, poolOverlay, kc.Args)
		}
		if !equality.Semantic.DeepEqual(hc.Ports, kc.Ports) || !equality.Semantic.DeepEqual(hc.Resources, kc.Resources) {
			t.Errorf("picker ports or resources differ: GIE's chart %v %v, config/%s %v %v", hc.Ports, hc.Resources, poolOverlay, kc.Ports, kc.Resources)
		}
		if d := compareRules("the picker's Roles", pickerRules(t, overlay, ns), pickerRules(t, gie, ns)); d != nil {
			t.Error(d[0])
		}
	})
	t.Run("the picker's label matchers name the sample tier's servedModel", func(t *testing.T) {
		checkPickerConfig(t)
	})
}

// checkPool checks the pool and its picker in objs against the router
// DaemonSet ds.
func checkPool(t *testing.T, ds *appsv1.DaemonSet, objs []*unstructured.Unstructured) {
	t.Helper()
	ns := ds.Namespace
	pool := find(objs, "InferencePool", ns, poolName)
	if pool == nil {
		t.Fatalf("no InferencePool %s/%s rendered: a pool selects the pods of its own namespace", ns, poolName)
	}
	if pool.GetAPIVersion() != "inference.networking.k8s.io/v1" {
		t.Errorf("pool apiVersion = %s, want GIE's v1 API", pool.GetAPIVersion())
	}
	router := ds.Spec.Template.Spec.Containers[0]

	selector, _, _ := unstructured.NestedStringMap(pool.Object, "spec", "selector", "matchLabels")
	if len(selector) == 0 {
		t.Error("the pool selects by no label")
	}
	for k, v := range selector {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the pool selects %s=%s, which the router pods (labels %v) do not carry", k, v, ds.Spec.Template.Labels)
		}
	}
	ports, _, _ := unstructured.NestedSlice(pool.Object, "spec", "targetPorts")
	if want := []any{map[string]any{"number": int64(listenPort(t, router, "--listen"))}}; !equality.Semantic.DeepEqual(ports, want) {
		t.Errorf("pool targetPorts = %v, want the router's front door %v", ports, want)
	}

	ref, _, _ := unstructured.NestedMap(pool.Object, "spec", "endpointPickerRef")
	refPort, _, _ := unstructured.NestedInt64(ref, "port", "number")
	svc := typed[corev1.Service](t, objs, "Service", ns, ref["name"].(string))
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int64(p.Port) == refPort }) {
		t.Errorf("endpointPickerRef port %d is not a port of Service %s (%v)", refPort, svc.Name, svc.Spec.Ports)
	}
	d := typed[appsv1.Deployment](t, objs, "Deployment", ns, ref["name"].(string))
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the picker's Service selects %s=%s, which its pods do not carry", k, v)
		}
	}
	picker := pickerContainer(t, objs, ns)
	if picker.Image != pickerImage {
		t.Errorf("picker image = %s, want %s", picker.Image, pickerImage)
	}
	if !slices.ContainsFunc(picker.Ports, func(p corev1.ContainerPort) bool { return int64(p.ContainerPort) == refPort }) {
		t.Errorf("the picker container does not listen on the ext-proc port %d", refPort)
	}
	for flag, want := range map[string]string{
		"--pool-name":                 poolName,
		"--pool-namespace":            ns,
		"--model-server-metrics-port": strconv.Itoa(listenPort(t, router, "--admin-listen")),
	} {
		if got := argValue(picker.Args, flag); got != want {
			t.Errorf("picker %s = %q, want %q", flag, got, want)
		}
	}

	// The mounted config is pickerConfigFile.
	file := argValue(picker.Args, "--config-file")
	dir, name := filepath.Split(file)
	var configMap string
	for _, m := range picker.VolumeMounts {
		if filepath.Clean(m.MountPath) == filepath.Clean(dir) {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					configMap = v.ConfigMap.Name
				}
			}
		}
	}
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", ns, configMap)
	want, err := os.ReadFile(filepath.Join(repoRoot, pickerConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data[name]; strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Errorf("ConfigMap %s key %s (the picker's --config-file %s) is not %s:\n%s", configMap, name, file, pickerConfigFile, got)
	}

	// The picker may read the pool and its pods.
	have := grants(pickerRules(t, objs, ns))
	for _, g := range []string{`apiGroup="" resource=pods`, `apiGroup="inference.networking.k8s.io" resource=inferencepools`} {
		for _, verb := range []string{"get", "list", "watch"} {
			if w := g + " resourceName=*any* verb=" + verb; !slices.Contains(have, w) {
				t.Errorf("the picker's ServiceAccount lacks %s", w)
			}
		}
	}
}

// addedLabels are the pod labels of to that from has not, or has with
// another value.
func addedLabels(from, to *appsv1.DaemonSet) map[string]string {
	out := map[string]string{}
	for k, v := range to.Spec.Template.Labels {
		if from.Spec.Template.Labels[k] != v {
			out[k] = v
		}
	}
	return out
}

// pickerContainer returns the container of the pool's picker Deployment,
// named by the pool's endpointPickerRef.
func pickerContainer(t *testing.T, objs []*unstructured.Unstructured, namespace string) corev1.Container {
	t.Helper()
	pool := find(objs, "InferencePool", namespace, poolName)
	if pool == nil {
		t.Fatalf("no InferencePool %s/%s rendered", namespace, poolName)
	}
	name, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "name")
	d := typed[appsv1.Deployment](t, objs, "Deployment", namespace, name)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("picker pod has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return d.Spec.Template.Spec.Containers[0]
}

// pickerRules are the rules of the Roles bound to the picker's
// ServiceAccount in namespace.
func pickerRules(t *testing.T, objs []*unstructured.Unstructured, namespace string) []rbacv1.PolicyRule {
	t.Helper()
	pool := find(objs, "InferencePool", namespace, poolName)
	name, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "name")
	sa := typed[appsv1.Deployment](t, objs, "Deployment", namespace, name).Spec.Template.Spec.ServiceAccountName
	var out []rbacv1.PolicyRule
	for _, u := range objs {
		if u.GetKind() != "RoleBinding" || u.GetNamespace() != namespace {
			continue
		}
		ref, subjects := binding(t, u)
		if ref.Kind == "Role" && slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace
		}) {
			out = append(out, typed[rbacv1.Role](t, objs, "Role", namespace, ref.Name).Rules...)
		}
	}
	return out
}

// checkPickerConfig requires every metric the picker reads to select, by
// model_name, the servedModel of poolSample's tier: one tier of a node
// that serves several.
func checkPickerConfig(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, poolSample))
	if err != nil {
		t.Fatal(err)
	}
	var tier struct {
		Spec struct {
			ServedModel string `json:"servedModel"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &tier); err != nil || tier.Spec.ServedModel == "" {
		t.Fatalf("%s: no servedModel (%v)", poolSample, err)
	}
	raw, err = os.ReadFile(filepath.Join(repoRoot, pickerConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Plugins []struct {
			Type       string          `json:"type"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"plugins"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var specs []string
	for _, p := range cfg.Plugins {
		if p.Type != "core-metrics-extractor" {
			continue
		}
		var params struct {
			DefaultEngine string              `json:"defaultEngine"`
			EngineConfigs []map[string]string `json:"engineConfigs"`
		}
		if err := json.Unmarshal(p.Parameters, &params); err != nil {
			t.Fatal(err)
		}
		for _, e := range params.EngineConfigs {
			if e["name"] == params.DefaultEngine {
				specs = append(specs, e["queuedRequestsSpec"], e["runningRequestsSpec"], e["kvUsageSpec"])
			}
		}
	}
	want := []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"}
	for i := range want {
		want[i] += `{model_name="` + tier.Spec.ServedModel + `"}`
	}
	if !slices.Equal(specs, want) {
		t.Errorf("the default engine's metrics = %q, want %q", specs, want)
	}
}

// listenPort is the port of the router's listen address flag (--listen=:8080).
func listenPort(t *testing.T, c corev1.Container, flag string) int {
	t.Helper()
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			p, err := strconv.Atoi(v[strings.LastIndex(v, ":")+1:])
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			return p
		}
	}
	t.Fatalf("router args %q have no %s", c.Args, flag)
	return 0
}

// argValue is the value of flag in args, given as "--flag value" or
// "--flag=value"; empty when absent.
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// specOf is an object's spec, nil for no object.
func specOf(u *unstructured.Unstructured) any {
	if u == nil {
		return nil
	}
	return u.Object["spec"]
}

// templateGIE renders GIE's inferencepool chart, from its pinned module, with
// giePoolValues as release poolName in namespace.
func templateGIE(t *testing.T, namespace string) []*unstructured.Unstructured {
	t.Helper()
	chart := gieChart(t)
	out, err := runHelm(t, "template", poolName, chart, "-n", namespace, "--values", giePoolValues)
	if err != nil {
		t.Fatalf("helm template GIE's inferencepool chart: %v", err)
	}
	return decode(t, out)
}

// gieChart copies GIE's inferencepool chart and the library chart it
// depends on (file://../epplib) out of the pinned module (gietest) into a
// temporary directory, builds its dependency and returns its
// directory. The module cache is read-only, hence the copy.
func gieChart(t *testing.T) string {
	t.Helper()
	dir := gietest.ModuleDir(t)
	dst := t.TempDir()
	for _, name := range []string{"inferencepool", "epplib"} {
		if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(filepath.Join(dir, "config", "charts", name))); err != nil {
			t.Fatal(err)
		}
	}
	chart := filepath.Join(dst, "inferencepool")
	if out, err := runHelm(t, "dependency", "build", chart); err != nil {
		t.Fatalf("helm dependency build: %v\n%s", err, out)
	}
	return chart
}

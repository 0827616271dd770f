package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// allOptions sets every value away from its default.
const allOptions = "test/helm/testdata/all-options.yaml"

// helmLabels are the labels the chart adds to metadata, never to selectors.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}

func TestHelmLint(t *testing.T) {
	for _, args := range [][]string{
		{"lint", "--strict", chartDir},
		{"lint", "--strict", chartDir, "--values", allOptions},
		{"lint", "--strict", chartDir, "--values", sluicePoolValues},
		{"lint", "--strict", chartDir, "--set-json", `router.apiKeys.keys=["k1","k2"]`},
	} {
		if out, err := runHelm(t, args...); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// secretValue returns the decoded value of key in Secret namespace/name.
func secretValue(t *testing.T, objs []*unstructured.Unstructured, namespace, name, key string) string {
	t.Helper()
	s := typed[corev1.Secret](t, objs, "Secret", namespace, name)
	v, ok := s.Data[key]
	if !ok {
		t.Fatalf("Secret %s/%s has no key %q", namespace, name, key)
	}
	return string(v)
}

// routerContainer returns the router DaemonSet in namespace and its
// container.
func routerContainer(t *testing.T, objs []*unstructured.Unstructured, namespace string) (*appsv1.DaemonSet, corev1.Container) {
	t.Helper()
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", namespace, "sluice-router")
	if len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("router pod has %d containers, want 1", len(ds.Spec.Template.Spec.Containers))
	}
	return ds, ds.Spec.Template.Spec.Containers[0]
}

// managerContainer returns the manager Deployment and its container.
func managerContainer(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := typed[appsv1.Deployment](t, objs, "Deployment", releaseNamespace, "sluice-manager")
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("manager pod has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

func secretVolumes(p corev1.PodSpec) map[string]string {
	out := map[string]string{}
	for _, v := range p.Volumes {
		if v.Secret != nil {
			out[v.Name] = v.Secret.SecretName
		}
	}
	return out
}

func TestTemplateDefaults(t *testing.T) {
	objs := template(t)

	t.Run("without a cluster no router Secret is rendered; the DaemonSet mounts the default Secrets", func(t *testing.T) {
		if got := kinds(objs)["Secret"]; got != 0 {
			t.Errorf("%d Secrets rendered without a cluster, want none: a random key would change on every render", got)
		}
		ds, _ := routerContainer(t, objs, "sluice-router")
		if got := secretVolumes(ds.Spec.Template.Spec); !maps.Equal(got, map[string]string{ //nolint:gosec // Secret names, not credentials.
			"api-keys": "sluice-router-api-keys", "admin-token": "sluice-router-admin-token"}) {
			t.Errorf("router secret volumes = %v", got)
		}
		if _, ok := ds.Spec.Template.Annotations["checksum/router-keys"]; ok {
			t.Error("generated keys roll the routers on each upgrade: checksum annotation present")
		}
	})

	t.Run("images are the GHCR repositories at the chart's appVersion", func(t *testing.T) {
		_, m := managerContainer(t, objs)
		_, r := routerContainer(t, objs, "sluice-router")
		if m.Image != "ghcr.io/sluice-dev/sluice-manager:v0.1.0-dev" || r.Image != "ghcr.io/sluice-dev/sluice-router:v0.1.0-dev" {
			t.Errorf("images = %s, %s", m.Image, r.Image)
		}
		if m.ImagePullPolicy != corev1.PullIfNotPresent || r.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("pull policies = %s, %s", m.ImagePullPolicy, r.ImagePullPolicy)
		}
	})

	t.Run("the manager serves secure metrics behind a Service", func(t *testing.T) {
		_, m := managerContainer(t, objs)
		if slices.ContainsFunc(m.Args, func(a string) bool { return strings.HasPrefix(a, "--metrics-secure") }) {
			t.Errorf("args %q: secure metrics are the manager's default, no flag", m.Args)
		}
		svc := typed[corev1.Service](t, objs, "Service", releaseNamespace, "sluice-manager-metrics")
		if !maps.Equal(svc.Spec.Selector, map[string]string{"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "manager"}) {
			t.Errorf("Service selector = %v", svc.Spec.Selector)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
			t.Errorf("Service ports = %+v", svc.Spec.Ports)
		}
	})

	t.Run("the router's namespace is created, privileged; monitoring objects are not rendered", func(t *testing.T) {
		ns := find(objs, "Namespace", "", "sluice-router")
		if ns == nil || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
			t.Errorf("Namespace sluice-router = %v", ns)
		}
		for _, key := range []string{"ServiceMonitor/sluice-system/sluice-manager-metrics", "ClusterRoleBinding//sluice-metrics-reader",
			"PodMonitor/sluice-router/sluice-router", "PrometheusRule/sluice-system/sluice"} {
			if index(objs)[key] != nil {
				t.Errorf("%s rendered by default", key)
			}
		}
		if find(objs, "Namespace", "", releaseNamespace) != nil {
			t.Error("the chart creates the release's namespace")
		}
	})

	t.Run("Helm's labels are on every object's metadata and on no selector", func(t *testing.T) {
		for _, u := range objs {
			if u.GetKind() == "CustomResourceDefinition" {
				continue // crds/ is not templated.
			}
			for _, l := range helmLabels {
				if _, ok := u.GetLabels()[l]; !ok {
					t.Errorf("%s has no label %s", objectKey(u), l)
				}
			}
		}
		d, _ := managerContainer(t, objs)
		ds, _ := routerContainer(t, objs, "sluice-router")
		for name, sel := range map[string]map[string]string{
			"manager": d.Spec.Selector.MatchLabels, "router": ds.Spec.Selector.MatchLabels,
		} {
			if !maps.Equal(sel, map[string]string{"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": name}) {
				t.Errorf("%s selector = %v", name, sel)
			}
		}
	})
}

// kinds counts the objects of each kind.
func kinds(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, u := range objs {
		out[u.GetKind()]++
	}
	return out
}

// TestTemplateStable renders the chart twice without a cluster (as helm
// template and GitOps tools do) and requires byte-identical output, with
// the default values and with the router's Secrets named in existingSecret.
// A render that generated keys would differ every time.
func TestTemplateStable(t *testing.T) {
	for name, extra := range map[string][]string{
		"default values": nil,
		"existing Secrets": {"--set", "router.apiKeys.existingSecret=my-router-keys",
			"--set", "router.adminToken.existingSecret=my-admin-token"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"template", "sluice", chartDir, "-n", releaseNamespace, "--include-crds"}, extra...)
			first, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			second, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if first != second {
				t.Errorf("two renders differ:\n%s", lineDiff(first, second))
			}
		})
	}
}

// lineDiff lists the lines of a that b does not have at the same place.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d: %q != %q", i+1, x, y))
		}
	}
	return strings.Join(out, "\n")
}

// TestTemplateExistingSecrets: with both existingSecret values set the chart
// renders no Secret and the DaemonSet mounts the named ones.
func TestTemplateExistingSecrets(t *testing.T) {
	objs := template(t, "--set", "router.apiKeys.existingSecret=my-router-keys",
		"--set", "router.adminToken.existingSecret=my-admin-token")
	if got := kinds(objs)["Secret"]; got != 0 {
		t.Errorf("%d Secrets rendered with both existingSecret values set, want none", got)
	}
	ds, _ := routerContainer(t, objs, "sluice-router")
	if got := secretVolumes(ds.Spec.Template.Spec); !maps.Equal(got, map[string]string{ //nolint:gosec // Secret names, not credentials.
		"api-keys": "my-router-keys", "admin-token": "my-admin-token"}) {
		t.Errorf("router secret volumes = %v", got)
	}
}

// TestTemplateAllOptions renders testdata/all-options.yaml and checks that
// each value took effect.
func TestTemplateAllOptions(t *testing.T) {
	objs := template(t, "--values", allOptions)
	const routerNS = "gpu-routers"

	t.Run("manager", func(t *testing.T) {
		d, m := managerContainer(t, objs)
		if m.Image != "registry.example.com/sluice-manager:v9.9.9" || m.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %s, pull policy %s", m.Image, m.ImagePullPolicy)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %v", d.Spec.Replicas)
		}
		for _, want := range []string{"--metrics-secure=false", "--zap-log-level=debug", "--leader-elect"} {
			if !slices.Contains(m.Args, want) {
				t.Errorf("manager args %q lack %s", m.Args, want)
			}
		}
		wantResources(t, "manager", m.Resources, "50m", "128Mi", "", "512Mi")
		wantPodMetadata(t, d.Spec.Template.ObjectMeta, "example.com/manager")
	})

	t.Run("router", func(t *testing.T) {
		ds, r := routerContainer(t, objs, routerNS)
		p := ds.Spec.Template.Spec
		if r.Image != "registry.example.com/sluice-router:v9.9.8" || r.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %s, pull policy %s", r.Image, r.ImagePullPolicy)
		}
		for _, want := range []string{"--listen=:8000", "--admin-listen=:9000", "--shutdown-grace=3s", "--shutdown-timeout=20s", "--log-level=DEBUG",
			"--ready-without-tiers"} { // a node without tiers must not block a rollout.
			if !slices.Contains(r.Args, want) {
				t.Errorf("router args %q lack %s", r.Args, want)
			}
		}
		// With hostNetwork a declared port is a host port, which would keep
		// the surge pod of a rollout from being scheduled.
		if len(r.Ports) != 0 {
			t.Errorf("ports = %v, want none", r.Ports)
		}
		for name, probe := range map[string]*corev1.Probe{"liveness": r.LivenessProbe, "readiness": r.ReadinessProbe} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.IntValue() != 9000 {
				t.Errorf("%s probe = %+v, want it on adminListen's port", name, probe)
			}
		}
		if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxSurge.String() != "1" || u.MaxUnavailable.String() != "0" {
			t.Errorf("rolling update = %+v, want maxSurge 1, maxUnavailable 0", u)
		}
		if !maps.Equal(p.NodeSelector, map[string]string{"example.com/gpu": "h100"}) {
			t.Errorf("nodeSelector = %v", p.NodeSelector)
		}
		if want := []corev1.Toleration{{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: "inference",
			Effect: corev1.TaintEffectNoExecute}}; !slices.Equal(p.Tolerations, want) {
			t.Errorf("tolerations = %v", p.Tolerations)
		}
		if p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds != 60 {
			t.Errorf("terminationGracePeriodSeconds = %v", p.TerminationGracePeriodSeconds)
		}
		wantResources(t, "router", r.Resources, "500m", "128Mi", "2", "1Gi")
		wantPodMetadata(t, ds.Spec.Template.ObjectMeta, "example.com/router")
	})

	t.Run("router namespace given, not created; every router object and subject in it", func(t *testing.T) {
		if ns := find(objs, "Namespace", "", routerNS); ns != nil {
			t.Error("router.createNamespace=false rendered the Namespace")
		}
		for _, key := range []string{"ServiceAccount/" + routerNS + "/sluice-router", "DaemonSet/" + routerNS + "/sluice-router"} {
			if index(objs)[key] == nil {
				t.Errorf("%s not rendered", key)
			}
		}
		b := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "", "sluice-router")
		if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sluice-router", Namespace: routerNS}}; !slices.Equal(b.Subjects, want) {
			t.Errorf("sluice-router binding subjects = %v", b.Subjects)
		}
		p := typed[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "", "sluice-router-own-node")
		if want := "request.userInfo.username == 'system:serviceaccount:" + routerNS + ":sluice-router'"; len(p.Spec.MatchConditions) != 1 ||
			p.Spec.MatchConditions[0].Expression != want {
			t.Errorf("own-node policy match conditions = %+v, want %s", p.Spec.MatchConditions, want)
		}
	})

	t.Run("API keys from an existing Secret, admin token from values", func(t *testing.T) {
		if find(objs, "Secret", routerNS, "sluice-router-api-keys") != nil || find(objs, "Secret", routerNS, "my-router-keys") != nil {
			t.Error("a Secret for the API keys was rendered although router.apiKeys.existingSecret is set")
		}
		if got := secretValue(t, objs, routerNS, "sluice-router-admin-token", "token"); got != "admin-token-from-values\n" {
			t.Errorf("admin token = %q", got)
		}
		ds, _ := routerContainer(t, objs, routerNS)
		if got := secretVolumes(ds.Spec.Template.Spec); !maps.Equal(got, map[string]string{ //nolint:gosec // Secret names, not credentials.
			"api-keys": "my-router-keys", "admin-token": "sluice-router-admin-token"}) {
			t.Errorf("router secret volumes = %v", got)
		}
	})

	t.Run("monitoring: the PodMonitor in the router's namespace on adminListen's port, the PrometheusRule, their labels", func(t *testing.T) {
		pm := find(objs, "PodMonitor", routerNS, "sluice-router")
		if pm == nil {
			t.Fatal("no PodMonitor in " + routerNS)
		}
		if pm.GetLabels()["release"] != "prometheus" {
			t.Errorf("PodMonitor labels = %v", pm.GetLabels())
		}
		eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		if got := mustJSON(t, eps); !strings.Contains(got, `"replacement":"${1}:9000"`) ||
			!strings.Contains(got, `"replacement":"[${1}]:9000"`) {
			t.Errorf("PodMonitor endpoints = %s, want the address on port 9000", got)
		}
		pr := find(objs, "PrometheusRule", releaseNamespace, "sluice")
		if pr == nil {
			t.Fatal("no PrometheusRule")
		}
		if pr.GetLabels()["role"] != "alert-rules" {
			t.Errorf("PrometheusRule labels = %v", pr.GetLabels())
		}
	})

	t.Run("monitoring: an HTTP ServiceMonitor (metrics not secure) and the Prometheus binding", func(t *testing.T) {
		sm := find(objs, "ServiceMonitor", releaseNamespace, "sluice-manager-metrics")
		if sm == nil {
			t.Fatal("no ServiceMonitor")
		}
		if sm.GetLabels()["release"] != "prometheus" {
			t.Errorf("ServiceMonitor labels = %v", sm.GetLabels())
		}
		ep := endpoint(t, sm)
		if ep["scheme"] != "http" || ep["port"] != "https" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
			t.Errorf("endpoint = %v", ep)
		}
		b := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "", "sluice-metrics-reader")
		if b.RoleRef.Name != "sluice-metrics-reader" || !slices.Equal(b.Subjects,
			[]rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}) {
			t.Errorf("binding %v %v", b.RoleRef, b.Subjects)
		}
	})
}

// endpoint returns the only endpoint of a ServiceMonitor, whose selector
// must be the manager's.
func endpoint(t *testing.T, sm *unstructured.Unstructured) map[string]any {
	t.Helper()
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !maps.Equal(sel, map[string]string{"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "manager"}) {
		t.Errorf("ServiceMonitor selector = %v", sel)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints = %v", eps)
	}
	return eps[0].(map[string]any)
}

func wantResources(t *testing.T, name string, r corev1.ResourceRequirements, cpuReq, memReq, cpuLim, memLim string) {
	t.Helper()
	for _, q := range []struct {
		list corev1.ResourceList
		res  corev1.ResourceName
		want string
	}{
		{r.Requests, corev1.ResourceCPU, cpuReq}, {r.Requests, corev1.ResourceMemory, memReq},
		{r.Limits, corev1.ResourceCPU, cpuLim}, {r.Limits, corev1.ResourceMemory, memLim},
	} {
		got, ok := q.list[q.res]
		switch {
		case q.want == "" && ok:
			t.Errorf("%s %s = %s, want none", name, q.res, got.String())
		case q.want != "" && (!ok || !got.Equal(resource.MustParse(q.want))):
			t.Errorf("%s %s = %s, want %s", name, q.res, got.String(), q.want)
		}
	}
}

// wantPodMetadata checks the pod template carries the values' label and
// annotation besides the selector labels.
func wantPodMetadata(t *testing.T, m metav1.ObjectMeta, annotation string) {
	t.Helper()
	if m.Labels["example.com/team"] != "inference" || m.Labels["app.kubernetes.io/name"] != "sluice" {
		t.Errorf("pod labels = %v", m.Labels)
	}
	if m.Annotations[annotation] != "annotated" {
		t.Errorf("pod annotations = %v", m.Annotations)
	}
}

// TestTemplateGivenKeys: keys given in values fill the Secrets, one a line,
// and changing them changes the router pods' checksum annotation, so that
// an upgrade rolls the routers and every node serves the new keys once the
// rollout completes.
func TestTemplateGivenKeys(t *testing.T) {
	render := func(keys, token string) (string, string, string) {
		objs := template(t, "--set-json", "router.apiKeys.keys="+keys, "--set", "router.adminToken.token="+token)
		ds, _ := routerContainer(t, objs, "sluice-router")
		return secretValue(t, objs, "sluice-router", "sluice-router-api-keys", "keys"),
			secretValue(t, objs, "sluice-router", "sluice-router-admin-token", "token"),
			ds.Spec.Template.Annotations["checksum/router-keys"]
	}
	keys, token, sum := render(`["key-one","key-two"]`, "the-admin-token")
	if keys != "key-one\nkey-two\n" || token != "the-admin-token\n" {
		t.Errorf("keys %q, token %q", keys, token)
	}
	want := sha256.Sum256([]byte(mustJSON(t, []string{"key-one", "key-two", "the-admin-token"})))
	if sum != hex.EncodeToString(want[:]) {
		t.Errorf("checksum/router-keys = %q, want the sha256 of the given keys", sum)
	}
	if _, _, again := render(`["key-one","key-two"]`, "the-admin-token"); again != sum {
		t.Error("the same keys gave another checksum")
	}
	if _, _, other := render(`["key-one","key-three"]`, "the-admin-token"); other == sum {
		t.Error("other keys gave the same checksum")
	}
	if _, _, other := render(`["key-one","key-two"]`, "another-token"); other == sum {
		t.Error("another token gave the same checksum")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTemplateSecureServiceMonitor: with secure metrics the ServiceMonitor
// scrapes HTTPS with Prometheus' ServiceAccount token and skips verifying
// the manager's self-signed certificate.
func TestTemplateSecureServiceMonitor(t *testing.T) {
	objs := template(t, "--set", "monitoring.serviceMonitor.enabled=true")
	sm := find(objs, "ServiceMonitor", releaseNamespace, "sluice-manager-metrics")
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("apiVersion = %s", sm.GetAPIVersion())
	}
	ep := endpoint(t, sm)
	want := map[string]any{ //nolint:gosec // a token's path, not a credential.
		"port": "https", "path": "/metrics", "scheme": "https",
		"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"tlsConfig":       map[string]any{"insecureSkipVerify": true},
		"relabelings":     []any{map[string]any{"targetLabel": "job", "replacement": "sluice-manager"}},
	}
	if mustJSON(t, ep) != mustJSON(t, want) {
		t.Errorf("endpoint = %s, want %s", mustJSON(t, ep), mustJSON(t, want))
	}
	if find(objs, "ClusterRoleBinding", "", "sluice-metrics-reader") != nil {
		t.Error("the reader binding was rendered without monitoring.prometheusServiceAccount")
	}
}

// TestTemplateRejects: contradictory values fail the render with a message
// naming the values.
func TestTemplateRejects(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "router.apiKeys.existingSecret=s", "--set-json", `router.apiKeys.keys=["k"]`},
			"router.apiKeys: set keys or existingSecret, not both"},
		{[]string{"--set", "router.adminToken.existingSecret=s", "--set", "router.adminToken.token=t"},
			"router.adminToken: set token or existingSecret, not both"},
		{[]string{"--set", "monitoring.prometheusServiceAccount.name=prometheus"},
			"monitoring.prometheusServiceAccount: set both name and namespace, or neither"},
		{[]string{"--set", "router.namespace=" + releaseNamespace},
			"router.namespace is the release's namespace"},
	} {
		if got := templateError(t, tc.args...); !strings.Contains(got, tc.want) {
			t.Errorf("helm template %v: error %q, want %q", tc.args, got, tc.want)
		}
	}
	// The same namespace is accepted when the chart does not create it.
	template(t, "--set", "router.namespace="+releaseNamespace, "--set", "router.createNamespace=false")
}

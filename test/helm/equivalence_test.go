package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// chartOnly are the objects the chart renders and config/default does not,
// and why; the default render has none of them. The router's Secrets are
// rendered only against a cluster or with given keys (with kustomize the
// operator creates them, kubectl create secret); the monitoring objects are
// optional.
var chartOnly = map[string]string{
	"ServiceMonitor/sluice-system/sluice-manager-metrics": "optional: monitoring.serviceMonitor.enabled",
	"ClusterRoleBinding//sluice-metrics-reader":           "optional: monitoring.prometheusServiceAccount",
}

// kustomizeOnly are the objects config/default renders and the chart does
// not, and why.
var kustomizeOnly = map[string]string{
	"Namespace//sluice-system": "the release's namespace: helm install -n sluice-system --create-namespace",
}

// difference is one field that differs between the two renders.
type difference struct {
	object, field    string
	kustomize, chart any
}

func (d difference) String() string {
	return fmt.Sprintf("%s: %s differs\n    kustomize: %s\n    chart:     %s", d.object, d.field, show(d.kustomize), show(d.chart))
}

// show formats a value as compact JSON.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// TestChartEquivalentToKustomize renders config/default with kustomize and
// the chart with its default values, and requires the same objects with the
// same security settings, pod specs, RBAC, Pod Security labels and CRD.
// Images are compared by repository; labels and annotations are not
// compared (the chart adds Helm's).
func TestChartEquivalentToKustomize(t *testing.T) {
	kust := index(renderKustomization(t, "default"))
	chart := index(template(t))

	var diffs []difference
	var problems []string
	for _, key := range sortedKeys(kust, chart) {
		k, c := kust[key], chart[key]
		switch {
		case c == nil:
			if _, ok := kustomizeOnly[key]; !ok {
				problems = append(problems, key+": rendered by kustomize only")
			}
			continue
		case k == nil:
			if _, ok := chartOnly[key]; !ok {
				problems = append(problems, key+": rendered by the chart only")
			}
			continue
		}
		diffs = append(diffs, compareObjects(t, key, k, c)...)
	}
	for key := range kustomizeOnly {
		if kust[key] == nil || chart[key] != nil {
			problems = append(problems, key+": listed as kustomize-only but is not")
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// index maps each object by objectKey.
func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		out[objectKey(u)] = u
	}
	return out
}

// sortedKeys is the sorted union of the maps' keys.
func sortedKeys(maps ...map[string]*unstructured.Unstructured) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// compareObjects compares what matters of one object's two renders.
func compareObjects(t *testing.T, key string, k, c *unstructured.Unstructured) []difference {
	t.Helper()
	switch k.GetKind() {
	case "Deployment":
		kd, cd := convert[appsv1.Deployment](t, k), convert[appsv1.Deployment](t, c)
		return compareFields(key, map[string][2]any{
			"spec.replicas": {kd.Spec.Replicas, cd.Spec.Replicas},
			"spec.selector": {kd.Spec.Selector, cd.Spec.Selector},
			"spec.strategy": {kd.Spec.Strategy, cd.Spec.Strategy},
		}, podFields(kd.Spec.Template.Spec, cd.Spec.Template.Spec))
	case "DaemonSet":
		kd, cd := convert[appsv1.DaemonSet](t, k), convert[appsv1.DaemonSet](t, c)
		return compareFields(key, map[string][2]any{
			"spec.selector":       {kd.Spec.Selector, cd.Spec.Selector},
			"spec.updateStrategy": {kd.Spec.UpdateStrategy, cd.Spec.UpdateStrategy},
		}, podFields(kd.Spec.Template.Spec, cd.Spec.Template.Spec))
	case "ClusterRole", "Role":
		return compareRules(key, rules(t, k), rules(t, c))
	case "ClusterRoleBinding", "RoleBinding":
		kr, ks := binding(t, k)
		cr, cs := binding(t, c)
		return compareFields(key, map[string][2]any{"roleRef": {kr, cr}, "subjects": {ks, cs}})
	case "Namespace":
		return compareFields(key, map[string][2]any{"Pod Security labels": {podSecurityLabels(k), podSecurityLabels(c)}})
	case "ServiceAccount":
		ka, ca := convert[corev1.ServiceAccount](t, k), convert[corev1.ServiceAccount](t, c)
		return compareFields(key, map[string][2]any{
			"automountServiceAccountToken": {ka.AutomountServiceAccountToken, ca.AutomountServiceAccountToken},
		})
	case "Service":
		ks, cs := convert[corev1.Service](t, k), convert[corev1.Service](t, c)
		serviceDefaults(ks)
		serviceDefaults(cs)
		return compareFields(key, map[string][2]any{
			"spec.type": {ks.Spec.Type, cs.Spec.Type}, "spec.selector": {ks.Spec.Selector, cs.Spec.Selector},
			"spec.ports": {ks.Spec.Ports, cs.Spec.Ports},
		})
	default:
		// The CRD and any kind added later: everything but labels and
		// annotations.
		return compareFields(key, map[string][2]any{"the whole object but labels and annotations": {withoutLabels(k), withoutLabels(c)}})
	}
}

// compareFields compares each named pair semantically (quantities by value)
// and returns the pairs that differ, sorted by field.
func compareFields(object string, fieldSets ...map[string][2]any) []difference {
	var out []difference
	for _, fields := range fieldSets {
		for name, pair := range fields {
			if !equality.Semantic.DeepEqual(pair[0], pair[1]) {
				out = append(out, difference{object: object, field: name, kustomize: pair[0], chart: pair[1]})
			}
		}
	}
	slices.SortFunc(out, func(a, b difference) int { return strings.Compare(a.field, b.field) })
	return out
}

// podFields pairs the compared fields of two pod specs. Containers are
// matched by name; images are compared by repository and arguments as sets.
func podFields(k, c corev1.PodSpec) map[string][2]any {
	f := map[string][2]any{
		"pod securityContext":           {k.SecurityContext, c.SecurityContext},
		"hostNetwork":                   {k.HostNetwork, c.HostNetwork},
		"dnsPolicy":                     {k.DNSPolicy, c.DNSPolicy},
		"serviceAccountName":            {k.ServiceAccountName, c.ServiceAccountName},
		"automountServiceAccountToken":  {k.AutomountServiceAccountToken, c.AutomountServiceAccountToken},
		"terminationGracePeriodSeconds": {k.TerminationGracePeriodSeconds, c.TerminationGracePeriodSeconds},
		"volumes":                       {k.Volumes, c.Volumes},
		"nodeSelector":                  {k.NodeSelector, c.NodeSelector},
		"tolerations":                   {k.Tolerations, c.Tolerations},
		"affinity":                      {k.Affinity, c.Affinity},
		"initContainers":                {k.InitContainers, c.InitContainers},
		"container names":               {containerNames(k), containerNames(c)},
	}
	for _, kc := range k.Containers {
		i := slices.IndexFunc(c.Containers, func(cc corev1.Container) bool { return cc.Name == kc.Name })
		if i < 0 {
			continue // reported by "container names".
		}
		cc := c.Containers[i]
		p := "container " + kc.Name + " "
		f[p+"image repository"] = [2]any{repository(kc.Image), repository(cc.Image)}
		f[p+"command"] = [2]any{kc.Command, cc.Command}
		f[p+"args (as a set)"] = [2]any{sorted(kc.Args), sorted(cc.Args)}
		f[p+"env"] = [2]any{kc.Env, cc.Env}
		f[p+"ports"] = [2]any{portDefaults(kc.Ports), portDefaults(cc.Ports)}
		f[p+"securityContext"] = [2]any{kc.SecurityContext, cc.SecurityContext}
		f[p+"livenessProbe"] = [2]any{kc.LivenessProbe, cc.LivenessProbe}
		f[p+"readinessProbe"] = [2]any{kc.ReadinessProbe, cc.ReadinessProbe}
		f[p+"startupProbe"] = [2]any{kc.StartupProbe, cc.StartupProbe}
		f[p+"volumeMounts"] = [2]any{kc.VolumeMounts, cc.VolumeMounts}
		f[p+"resources"] = [2]any{kc.Resources, cc.Resources}
	}
	return f
}

// portDefaults fills the protocol the API server defaults, so that a render
// that spells it out equals one that does not.
func portDefaults(ports []corev1.ContainerPort) []corev1.ContainerPort {
	out := slices.Clone(ports)
	for i := range out {
		if out[i].Protocol == "" {
			out[i].Protocol = corev1.ProtocolTCP
		}
	}
	return out
}

// serviceDefaults fills the type and port protocols the API server
// defaults.
func serviceDefaults(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range s.Spec.Ports {
		if s.Spec.Ports[i].Protocol == "" {
			s.Spec.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
}

func containerNames(p corev1.PodSpec) []string {
	var out []string
	for _, c := range p.Containers {
		out = append(out, c.Name)
	}
	return out
}

// repository is an image reference without its tag or digest.
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// rules returns the rules of a ClusterRole or Role.
func rules(t *testing.T, u *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	if u.GetKind() == "Role" {
		return convert[rbacv1.Role](t, u).Rules
	}
	return convert[rbacv1.ClusterRole](t, u).Rules
}

// grants expands rules into one line per apiGroup, resource, resourceName
// (or non-resource URL) and verb: two rule lists that grant the same are
// the same set, however their rules are grouped.
func grants(rules []rbacv1.PolicyRule) []string {
	orAll := func(s []string) []string {
		if len(s) == 0 {
			return []string{"*any*"}
		}
		return s
	}
	var out []string
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				out = append(out, "nonResourceURL="+url+" verb="+verb)
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					for _, name := range orAll(r.ResourceNames) {
						out = append(out, fmt.Sprintf("apiGroup=%q resource=%s resourceName=%s verb=%s", group, res, name, verb))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// compareRules compares two rule lists as sets of grants and reports what
// each grants that the other does not.
func compareRules(object string, k, c []rbacv1.PolicyRule) []difference {
	kg, cg := grants(k), grants(c)
	var onlyK, onlyC []string
	for _, g := range kg {
		if !slices.Contains(cg, g) {
			onlyK = append(onlyK, g)
		}
	}
	for _, g := range cg {
		if !slices.Contains(kg, g) {
			onlyC = append(onlyC, g)
		}
	}
	if len(onlyK) == 0 && len(onlyC) == 0 {
		return nil
	}
	return []difference{{object: object, field: "rules (grants only one side has)", kustomize: onlyK, chart: onlyC}}
}

// binding returns a binding's roleRef and its subjects, sorted.
func binding(t *testing.T, u *unstructured.Unstructured) (rbacv1.RoleRef, []rbacv1.Subject) {
	t.Helper()
	var ref rbacv1.RoleRef
	var subjects []rbacv1.Subject
	if u.GetKind() == "RoleBinding" {
		b := convert[rbacv1.RoleBinding](t, u)
		ref, subjects = b.RoleRef, b.Subjects
	} else {
		b := convert[rbacv1.ClusterRoleBinding](t, u)
		ref, subjects = b.RoleRef, b.Subjects
	}
	slices.SortFunc(subjects, func(a, b rbacv1.Subject) int { return strings.Compare(show(a), show(b)) })
	return ref, subjects
}

// podSecurityLabels are a namespace's pod-security.kubernetes.io labels.
func podSecurityLabels(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for k, v := range u.GetLabels() {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

// withoutLabels is an object without its labels and annotations, in a form
// (decoded JSON) in which both renders' numbers compare equal.
func withoutLabels(u *unstructured.Unstructured) any {
	c := u.DeepCopy()
	c.SetLabels(nil)
	c.SetAnnotations(nil)
	js, err := c.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	var out any
	if err := json.Unmarshal(js, &out); err != nil {
		return err.Error()
	}
	return out
}

// TestChartCRDIsConfigCRD requires the chart's CRD to be the generated one,
// byte for byte (`make manifests` copies it).
func TestChartCRDIsConfigCRD(t *testing.T) {
	const name = "sluice.dev_replicatiers.yaml"
	want, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "bases", name))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "crds", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s/crds/%s differs from config/crd/bases/%s: run `make manifests`", chartDir, name, name)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot, chartDir, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%s/crds holds %d files, want only %s", chartDir, len(entries), name)
	}
}

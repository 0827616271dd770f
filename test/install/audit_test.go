package install

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// access is one (verb, resource, scope) an identity requested or is granted.
// Resource requests have Resource (with "/subresource") and Group; a
// non-resource request has Path instead. Namespace is empty for a
// cluster-scoped request and for a grant of a ClusterRoleBinding, which
// holds in every namespace.
type access struct {
	Verb      string
	Group     string
	Resource  string
	Namespace string
	Path      string
}

// String formats an access as "verb group/resource in namespace".
func (a access) String() string {
	if a.Path != "" {
		return a.Verb + " " + a.Path
	}
	group := a.Group
	if group == "" {
		group = "core"
	}
	scope := "cluster-wide"
	if a.Namespace != "" {
		scope = "in namespace " + a.Namespace
	}
	return fmt.Sprintf("%s %s/%s %s", a.Verb, group, a.Resource, scope)
}

// covers reports whether grant a authorizes request r of the same identity:
// same verb and resource (or path), and a cluster-wide grant or the
// request's namespace.
func (a access) covers(r access) bool {
	if a.Path != "" || r.Path != "" {
		return a.Verb == r.Verb && a.Path == r.Path
	}
	return a.Verb == r.Verb && a.Group == r.Group && a.Resource == r.Resource &&
		(a.Namespace == "" || a.Namespace == r.Namespace)
}

// request is one audited request of an identity.
type request struct {
	access
	// Allowed is the authorizer's decision.
	Allowed bool
	// Name is the object's name, if any.
	Name string
	// Code is the response's HTTP status (0 before a watch ends).
	Code int
}

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// decisionAnnotation is the audit annotation with the authorizer's decision
// ("allow" or "forbid").
const decisionAnnotation = "authorization.k8s.io/decision"

// readAudit returns the requests of each user in the audit log from byte
// offset from on (the effective user: impersonated if impersonating), one
// per request (a request logged at two stages counts once, with its last
// stage's status), and the size of the log it read.
func readAudit(t *testing.T, path string, from int64) (map[string][]request, int64) {
	t.Helper()
	raw, err := os.ReadFile(path) //nolint:gosec // the test's own audit log.
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	if from > int64(len(raw)) {
		t.Fatalf("audit log shorter (%d) than offset %d", len(raw), from)
	}
	type seen struct {
		user string
		i    int
	}
	index := map[string]seen{}
	out := map[string][]request{}
	sc := bufio.NewScanner(bytes.NewReader(raw[from:]))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// The last line may be cut while the API server writes it.
			continue
		}
		decision, ok := e.Annotations[decisionAnnotation]
		if !ok {
			continue // rejected before authorization (authentication).
		}
		user := e.User.Username
		if e.ImpersonatedUser != nil {
			user = e.ImpersonatedUser.Username
		}
		r := request{Allowed: decision == "allow"}
		r.Verb = e.Verb
		if e.ObjectRef != nil && e.ObjectRef.Resource != "" {
			r.Group, r.Resource, r.Namespace, r.Name = e.ObjectRef.APIGroup, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name
			if e.ObjectRef.Subresource != "" {
				r.Resource += "/" + e.ObjectRef.Subresource
			}
		} else {
			r.Path, _, _ = strings.Cut(e.RequestURI, "?")
		}
		if e.ResponseStatus != nil {
			r.Code = e.ResponseStatus.Code
		}
		if s, ok := index[e.AuditID]; ok {
			out[s.user][s.i] = r
			continue
		}
		index[e.AuditID] = seen{user: user, i: len(out[user])}
		out[user] = append(out[user], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	return out, int64(len(raw))
}

// grantsOf expands the rendered RBAC bound to ServiceAccount namespace/name
// into one access per verb × resource (or URL) of each rule, scoped to the
// binding: cluster-wide for a ClusterRoleBinding, the RoleBinding's
// namespace for a RoleBinding. Wildcards and resourceNames fail the test:
// a grant of "everything" cannot be proven used.
func grantsOf(t *testing.T, objs []*unstructured.Unstructured, namespace, name string) []access {
	t.Helper()
	var out []access
	for _, u := range objs {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		scope := ""
		switch u.GetKind() {
		case "ClusterRoleBinding":
			b := find[rbacv1.ClusterRoleBinding](t, objs, u.GetKind(), u.GetName())
			ref, subjects = b.RoleRef, b.Subjects
		case "RoleBinding":
			b := find[rbacv1.RoleBinding](t, objs, u.GetKind(), u.GetName())
			ref, subjects, scope = b.RoleRef, b.Subjects, b.Namespace
		default:
			continue
		}
		if !slices.Contains(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if ref.Kind == "ClusterRole" {
			rules = find[rbacv1.ClusterRole](t, objs, "ClusterRole", ref.Name).Rules
		} else {
			rules = roleIn(t, objs, scope, ref.Name).Rules
		}
		for _, rule := range rules {
			if len(rule.ResourceNames) > 0 {
				t.Fatalf("%s %s: resourceNames are not expanded by this test", ref.Kind, ref.Name)
			}
			for _, verb := range rule.Verbs {
				for _, url := range rule.NonResourceURLs {
					out = append(out, access{Verb: verb, Path: url})
				}
				for _, group := range rule.APIGroups {
					for _, res := range rule.Resources {
						out = append(out, access{Verb: verb, Group: group, Resource: res, Namespace: scope})
					}
				}
			}
		}
	}
	for _, g := range out {
		if strings.Contains(g.Verb+g.Group+g.Resource+g.Path, "*") {
			t.Fatalf("ServiceAccount %s/%s is granted a wildcard: %s", namespace, name, g)
		}
	}
	return out
}

// roleIn returns the rendered Role namespace/name.
func roleIn(t *testing.T, objs []*unstructured.Unstructured, namespace, name string) *rbacv1.Role {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "Role" && u.GetNamespace() == namespace && u.GetName() == name {
			return find[rbacv1.Role](t, []*unstructured.Unstructured{u}, "Role", name)
		}
	}
	t.Fatalf("the rendered manifests have no Role %s/%s", namespace, name)
	return nil
}

// unused returns the grants no allowed request used and that are not
// allowlisted, formatted.
func unused(grants []access, reqs []request, allow map[access]string) []string {
	var out []string
	for _, g := range grants {
		if _, ok := allow[g]; ok {
			continue
		}
		used := slices.ContainsFunc(reqs, func(r request) bool { return r.Allowed && g.covers(r.access) })
		if !used {
			out = append(out, g.String())
		}
	}
	return out
}

// forbidden returns the requests that were denied, formatted and
// deduplicated.
func forbidden(reqs []request) []string {
	var out []string
	for _, r := range reqs {
		if !r.Allowed {
			out = append(out, r.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// summary formats the distinct accesses of reqs, one a line, for a failure
// message.
func summary(reqs []request) string {
	var lines []string
	for _, r := range reqs {
		d := "allowed"
		if !r.Allowed {
			d = "FORBIDDEN"
		}
		lines = append(lines, fmt.Sprintf("  %s (%s)", r.String(), d))
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n")
}

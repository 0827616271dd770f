package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Bounds of one manifest file.
const (
	// MaxFileBytes bounds a manifest file. It is the size limit of a
	// ConfigMap, the usual way such a directory reaches a router pod, and far
	// above what 256 tiers need.
	MaxFileBytes = 1 << 20
	// MaxDocuments bounds the YAML documents of one file: the router serves at
	// most MaxTiers tiers, and a file cannot usefully declare more.
	MaxDocuments = MaxTiers
	// maxReportedErrors bounds the field errors quoted for one document, so a
	// badly broken file cannot flood the admin API.
	maxReportedErrors = 8
	// maxMessageLength bounds one FileError message for the same reason.
	maxMessageLength = 1024
	// defaultNamespace is the namespace of a manifest without one, as
	// kubectl would apply it.
	defaultNamespace = "default"
)

// manifest is the valid content of one manifest file.
type manifest struct {
	// tiers are the tiers of this node, defaulted and validated.
	tiers []v1alpha1.ReplicaTier
	// otherNodes holds the spec.nodeName of every document of another node,
	// in document order; a name that is not a valid node name is
	// invalidNodeName.
	otherNodes []string
}

// invalidNodeName stands for a spec.nodeName of another node that is not a
// valid node name: documents of other nodes are not validated, and their
// names are reported in logs.
const invalidNodeName = "(invalid node name)"

// parseManifest decodes every ReplicaTier document of one multi-document
// YAML file, keeps those whose spec.nodeName is node, and defaults and
// validates them with v1alpha1.Default and v1alpha1.Validate. Any problem in
// any document rejects the whole file with an error wrapping
// ErrInvalidManifest; documents of other nodes are decoded but not
// validated, and their node names are returned. Empty documents are
// skipped.
func parseManifest(data []byte, node string) (manifest, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var m manifest
	seen := map[string]bool{}
	for doc := 0; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return manifest{}, fmt.Errorf("%w: document %d: %w", ErrInvalidManifest, doc, err)
		}
		if doc >= MaxDocuments {
			return manifest{}, fmt.Errorf("%w: more than %d documents", ErrInvalidManifest, MaxDocuments)
		}
		if isEmptyDocument(raw) {
			continue
		}
		var t v1alpha1.ReplicaTier
		if err := yaml.UnmarshalStrict(raw, &t); err != nil {
			return manifest{}, fmt.Errorf("%w: document %d: %w", ErrInvalidManifest, doc, err)
		}
		if t.APIVersion != v1alpha1.GroupVersion.String() || t.Kind != "ReplicaTier" {
			return manifest{}, fmt.Errorf("%w: document %d: want apiVersion %s and kind ReplicaTier",
				ErrInvalidManifest, doc, v1alpha1.GroupVersion.String())
		}
		if t.Namespace == "" {
			t.Namespace = defaultNamespace
		}
		if err := validateName(t.Namespace, t.Name); err != nil {
			return manifest{}, fmt.Errorf("%w: document %d: %w", ErrInvalidManifest, doc, err)
		}
		key := t.Namespace + "/" + t.Name
		if seen[key] {
			return manifest{}, fmt.Errorf("%w: document %d: tier %s is declared twice", ErrInvalidManifest, doc, key)
		}
		seen[key] = true
		if t.Spec.NodeName != node {
			other := t.Spec.NodeName
			if len(utilvalidation.IsDNS1123Subdomain(other)) > 0 {
				other = invalidNodeName
			}
			m.otherNodes = append(m.otherNodes, other)
			continue
		}
		v1alpha1.Default(&t)
		if errs := v1alpha1.Validate(&t); len(errs) > 0 {
			return manifest{}, fmt.Errorf("%w: document %d (%s): %s", ErrInvalidManifest, doc, key, describe(errs))
		}
		t.Status = v1alpha1.ReplicaTierStatus{}
		m.tiers = append(m.tiers, t)
	}
}

// isEmptyDocument reports whether a YAML document holds only blank lines
// and comments.
func isEmptyDocument(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// validateName checks a tier's namespace and name with the Kubernetes object
// name rules, so keys are safe in URLs, headers and logs.
func validateName(namespace, name string) error {
	if msgs := utilvalidation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return fmt.Errorf("metadata.namespace: %s", msgs[0])
	}
	if name == "" {
		return errors.New("metadata.name: Required value")
	}
	if msgs := utilvalidation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("metadata.name: %s", msgs[0])
	}
	return nil
}

// describe formats field errors by path, type and detail, leaving out the
// offending values (an endpoint could carry credentials).
func describe(errs field.ErrorList) string {
	parts := make([]string, 0, min(len(errs), maxReportedErrors)+1)
	for i, e := range errs {
		if i == maxReportedErrors {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-i))
			break
		}
		s := e.Field + ": " + e.Type.String()
		if e.Detail != "" {
			s += ": " + e.Detail
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// message bounds an error's text for a FileError.
func message(err error) string {
	s := err.Error()
	if len(s) > maxMessageLength {
		s = strings.ToValidUTF8(s[:maxMessageLength], "") + "…"
	}
	return s
}

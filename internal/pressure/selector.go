package pressure

import (
	"regexp"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/api/bounds"
)

var (
	// selectorRE is the whole selector grammar (bounds.SeriesSelectorPattern).
	selectorRE = regexp.MustCompile(bounds.SeriesSelectorPattern)
	// matcherRE finds the matchers of a selector that selectorRE accepted:
	// a value holds no double quote, so each match ends at its own quote.
	matcherRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)
)

// selector picks the samples of one metric whose labels satisfy every
// matcher, as a Prometheus instant vector selector with equality matchers
// does: a sample without a label has it empty, so label="" picks the
// samples without it. A selector without matchers picks every sample of
// its metric.
type selector struct {
	name     string
	matchers []matcher
}

// matcher requires a sample's label to have a value.
type matcher struct {
	label, value string
}

// parseSelector reads one selector of bounds.SeriesSelectorPattern, at
// most bounds.MaxSeriesSelectorLength bytes. Errors: ErrInvalidSeries.
func parseSelector(s string) (selector, error) {
	if len(s) > bounds.MaxSeriesSelectorLength || !selectorRE.MatchString(s) {
		return selector{}, ErrInvalidSeries
	}
	// A metric name holds no brace: the first one opens the matchers.
	name, matchers, _ := strings.Cut(s, "{")
	sel := selector{name: name}
	for _, m := range matcherRE.FindAllStringSubmatch(matchers, -1) {
		sel.matchers = append(sel.matchers, matcher{label: m[1], value: m[2]})
	}
	return sel, nil
}

// matches reports whether a sample's labels satisfy every matcher.
func (s selector) matches(labels []*dto.LabelPair) bool {
	for _, want := range s.matchers {
		got := ""
		for _, l := range labels {
			if l.GetName() == want.label {
				got = l.GetValue()
				break
			}
		}
		if got != want.value {
			return false
		}
	}
	return true
}

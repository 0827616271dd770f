package pressure

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/api/bounds"
)

func TestParseSelector(t *testing.T) {
	valid := []struct {
		text string
		want selector
	}{
		{"vllm:num_requests_running", selector{name: "vllm:num_requests_running"}},
		{"_a", selector{name: "_a"}},
		{`nv_trt_llm_request_metrics{request_type="waiting"}`,
			selector{name: "nv_trt_llm_request_metrics", matchers: []matcher{{"request_type", "waiting"}}}},
		// Values may hold braces, commas, equals signs and spaces: a value
		// ends at its quote.
		{`a{b="}",c="{,=",d="",e="x y"}`,
			selector{name: "a", matchers: []matcher{{"b", "}"}, {"c", "{,="}, {"d", ""}, {"e", "x y"}}}},
		{strings.Repeat("a", bounds.MaxSeriesSelectorLength), selector{name: strings.Repeat("a", bounds.MaxSeriesSelectorLength)}},
	}
	for _, tc := range valid {
		got, err := parseSelector(tc.text)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSelector(%q) = %+v, %v; want %+v", tc.text, got, err, tc.want)
		}
	}
	for _, text := range []string{
		"", "9a", "a-b", "a b", "a{}", "a{b}", "a{b=c}", `a{b='c'}`, `a{b!="c"}`, `a{b=~"c"}`,
		`a{b="c",}`, `a{b="c" }`, `a{ b="c"}`, `a{b="c"`, `a{b="\"}`, `a{b="""}`, "a{b=\"\n\"}", `a{b="é"}`,
		`a{b="1",c="2",d="3",e="4",f="5"}`, `a{__name__="b"}x`, `{"a"}`,
		strings.Repeat("a", bounds.MaxSeriesSelectorLength+1),
	} {
		if got, err := parseSelector(text); !errors.Is(err, ErrInvalidSeries) {
			t.Errorf("parseSelector(%q) = %+v, %v; want ErrInvalidSeries", text, got, err)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	labels := func(kv ...[2]string) []*dto.LabelPair {
		var out []*dto.LabelPair
		for _, p := range kv {
			out = append(out, &dto.LabelPair{Name: &p[0], Value: &p[1]})
		}
		return out
	}
	tests := []struct {
		text   string
		labels []*dto.LabelPair
		want   bool
	}{
		{"a", nil, true},
		{"a", labels([2]string{"model", "m"}), true},
		{`a{model="m"}`, labels([2]string{"model", "m"}, [2]string{"rank", "0"}), true},
		{`a{rank="0",model="m"}`, labels([2]string{"model", "m"}, [2]string{"rank", "0"}), true},
		{`a{model="m"}`, labels([2]string{"model", "n"}), false},
		{`a{model="m"}`, nil, false},
		// As in PromQL, an absent label is empty.
		{`a{rank=""}`, labels([2]string{"model", "m"}), true},
		{`a{rank=""}`, labels([2]string{"rank", "0"}), false},
	}
	for _, tc := range tests {
		sel, err := parseSelector(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.matches(tc.labels); got != tc.want {
			t.Errorf("%s matches %v = %t, want %t", tc.text, tc.labels, got, tc.want)
		}
	}
}

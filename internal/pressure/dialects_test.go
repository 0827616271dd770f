package pressure_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/pressure"
)

// dialectNames returns the adapter table's engines as sorted strings.
func dialectNames() []string {
	var names []string
	for _, e := range pressure.Engines() {
		names = append(names, string(e))
	}
	return names
}

// sortedStrings returns the values' string forms, sorted.
func sortedStrings[S ~string](values []S) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		out = append(out, string(v))
	}
	slices.Sort(out)
	return out
}

// TestAPIEnginesAreTheAdapterTable ties every listing of the engine
// dialects to the adapter table: the Enum marker on the API's Engine type,
// the generated CRD's enum, the API's Engines, and what Validate accepts
// and names when it refuses. A dialect added in one place and not the
// others fails here.
func TestAPIEnginesAreTheAdapterTable(t *testing.T) {
	want := dialectNames()
	if len(want) == 0 {
		t.Fatal("the adapter table is empty")
	}

	src, err := os.ReadFile("../../api/v1alpha1/replicatier_types.go")
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`(?m)^// \+kubebuilder:validation:Enum=(.*)\ntype Engine string$`).FindSubmatch(src)
	if marker == nil {
		t.Fatal("no Enum marker above type Engine")
	}
	if got := sortedStrings(strings.Split(string(marker[1]), ";")); !slices.Equal(got, want) {
		t.Errorf("Engine's Enum marker lists %v, want the adapter table's %v", got, want)
	}

	raw, err := os.ReadFile("../../config/crd/bases/sluice.dev_replicatiers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									Members struct {
										Items struct {
											Properties struct {
												Metrics struct {
													Properties struct {
														Engine struct {
															Enum []string `json:"enum"`
														} `json:"engine"`
													} `json:"properties"`
												} `json:"metrics"`
											} `json:"properties"`
										} `json:"items"`
									} `json:"members"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil || len(crd.Spec.Versions) == 0 {
		t.Fatalf("CRD: %v", err)
	}
	enum := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties.Members.Items.Properties.Metrics.Properties.Engine.Enum
	if got := sortedStrings(enum); !slices.Equal(got, want) {
		t.Errorf("the CRD's engine enum is %v, want the adapter table's %v", got, want)
	}

	if got := sortedStrings(sluicev1.Engines()); !slices.Equal(got, want) {
		t.Errorf("v1alpha1.Engines() = %v, want the adapter table's %v", got, want)
	}

	base := validationtable.Base()
	for _, name := range want {
		tier := base.DeepCopy()
		tier.Spec.Members[0].Metrics = &sluicev1.MetricsSpec{Engine: sluicev1.Engine(name)}
		if errs := sluicev1.Validate(tier); len(errs) != 0 {
			t.Errorf("engine %s: Validate = %v", name, errs)
		}
	}
	tier := base.DeepCopy()
	tier.Spec.Members[0].Metrics = &sluicev1.MetricsSpec{Engine: "triton"}
	errs := sluicev1.Validate(tier)
	if len(errs) != 1 {
		t.Fatalf("engine triton: Validate = %v, want one error", errs)
	}
	var named []string
	for _, q := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(errs[0].Detail, -1) {
		named = append(named, q[1])
	}
	if slices.Sort(named); !slices.Equal(named, want) {
		t.Errorf("Validate refuses triton naming %v, want the adapter table's %v", named, want)
	}
}

// TestEveryDialectHasAFlavor: enginesim exposes exactly the dialects the
// router reads, so each adapter can be run against the simulator.
func TestEveryDialectHasAFlavor(t *testing.T) {
	for _, name := range dialectNames() {
		var f enginesim.Flavor
		if err := f.Set(name); err != nil {
			t.Errorf("dialect %s has no enginesim flavor: %v", name, err)
		}
	}
	if got := sortedStrings(enginesim.Flavors()); !slices.Equal(got, dialectNames()) {
		t.Errorf("enginesim.Flavors() = %v, want the adapter table's %v", got, dialectNames())
	}
}

// deref returns a signal's value, or -1 when it is missing.
func deref(v *float64) float64 {
	if v == nil {
		return -1
	}
	return *v
}

// TestAdaptersReadTheirFlavor collects each flavor's /metrics from a live
// enginesim with the matching engine, and with the same series named by a
// member that declares no engine: both read the simulator's state.
func TestAdaptersReadTheirFlavor(t *testing.T) {
	named := map[pressure.Engine]pressure.Series{
		pressure.EngineTritonTRTLLM: {
			Running: `nv_trt_llm_request_metrics{request_type="scheduled"}`,
			Waiting: `nv_trt_llm_request_metrics{request_type="waiting"}`,
			KVUsage: `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}`,
		},
		pressure.EngineTRTLLMServe: {
			Running: "trtllm_num_requests_running",
			Waiting: "trtllm_num_requests_waiting",
			KVUsage: "trtllm_kv_cache_utilization",
		},
	}
	for _, engine := range pressure.Engines() {
		t.Run(string(engine), func(t *testing.T) {
			cfg := enginesim.DefaultConfig()
			cfg.Flavor = enginesim.Flavor(engine)
			cfg.MaxNumSeqs, cfg.HiddenLoad, cfg.HiddenLoadTokens, cfg.KVCapacityTokens = 8, 3, 1000, 8000
			sim, err := enginesim.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			targets := map[string]pressure.Target{"engine": {MetricsURL: srv.URL + "/metrics", Engine: engine}}
			if series, ok := named[engine]; ok {
				targets["named series"] = pressure.Target{MetricsURL: srv.URL + "/metrics", Series: series}
			}
			for name, target := range targets {
				tel, err := pressure.HTTPCollector{}.Collect(context.Background(), target)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				wantKV := 0.375 // 3 hidden sequences of 1000 tokens in 8000
				if engine == pressure.EngineTGI {
					wantKV = -1 // TGI reports none
				}
				got := fmt.Sprint(deref(tel.Running), deref(tel.Waiting), deref(tel.KVUsage))
				if want := fmt.Sprint(3, 0, wantKV); got != want {
					t.Errorf("%s: running, waiting, KV = %s, want %s (-1: missing)", name, got, want)
				}
			}
		})
	}
}

// TestAPIAndCacheAgreeOnSeries: a named series the API's validation
// accepts is one the pressure cache registers, and one it refuses the
// cache refuses too, so a tier that reaches the router reads as declared.
func TestAPIAndCacheAgreeOnSeries(t *testing.T) {
	for _, sel := range []string{
		"a", "srv:requests", `srv_requests{state="running"}`, `a{b="",c="x y",d="}{,=",e="~!#"}`,
		strings.Repeat("a", 256), strings.Repeat("a", 257), "9a", "a{}", "a{b=c}", `a{b="1", c="2"}`,
		`a{b=~"c"}`, `a{b="c\"}`, `a{b="é"}`, `a{b="1",c="2",d="3",e="4",f="5"}`,
	} {
		tier := validationtable.Base()
		tier.Spec.Members[0].Metrics = &sluicev1.MetricsSpec{Series: &sluicev1.SeriesSpec{Running: sluicev1.SeriesSelector(sel)}}
		apiOK := len(sluicev1.Validate(tier)) == 0

		c := pressure.New(pressure.Options{})
		member := pressure.Member{ID: "a", MetricsURL: "http://127.0.0.1:9/metrics", Capacity: 1, Series: pressure.Series{Running: sel}}
		err := c.Reconfigure([]pressure.Tier{{Key: "t", Members: []pressure.Member{member, {ID: "b", Capacity: 1}}}})
		c.Close()
		if cacheOK := err == nil; cacheOK != apiOK || err != nil && !errors.Is(err, pressure.ErrInvalidSeries) {
			t.Errorf("series %q: API accepts %t, cache %v", sel, apiOK, err)
		}
	}
}

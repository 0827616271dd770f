// Package validationtable is the one table of ReplicaTier validation cases.
// The same rows run against the API server (test/envtest) and against
// v1alpha1.Validate, so the CRD and the Go function cannot drift apart.
package validationtable

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// Row is one validation case: Mutate is applied to a copy of Base, and every
// string of WantErrors must appear in the rejection. An empty WantErrors
// means the object is valid.
type Row struct {
	// Desc names the case.
	Desc string
	// Mutate changes the base object.
	Mutate func(t *sluicev1.ReplicaTier)
	// WantErrors are substrings the error must contain; none means valid.
	WantErrors []string
}

// Base is a valid two-member Capacity tier.
func Base() *sluicev1.ReplicaTier {
	return &sluicev1.ReplicaTier{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "default"},
		Spec: sluicev1.ReplicaTierSpec{
			NodeName:    "gpu-node-1",
			Aliases:     []string{"llama-70b", "chat"},
			ServedModel: "meta-llama/Llama-3.1-70B-Instruct",
			Strategy:    sluicev1.StrategyCapacity,
			Members: []sluicev1.Member{
				{ID: "gpu0", Endpoint: "http://127.0.0.1:8001", MaxConcurrency: ptr(32),
					Metrics: &sluicev1.MetricsSpec{Engine: sluicev1.EngineVLLM}},
				{ID: "gpu1", Endpoint: "http://127.0.0.1:8002", MaxConcurrency: ptr(32)},
			},
		},
	}
}

func ptr(v int32) *int32 { return &v }

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// queue sets the tier's admission queue; perTenant zero leaves the tenant
// share absent, maxWait nil leaves the wait absent.
func queue(t *sluicev1.ReplicaTier, maxRequests int32, maxWait *metav1.Duration, perTenant int32) {
	t.Spec.Queue = &sluicev1.QueueSpec{MaxRequests: maxRequests, MaxWait: maxWait}
	if perTenant != 0 {
		t.Spec.Queue.MaxRequestsPerTenant = ptr(perTenant)
	}
}

func members(n int) []sluicev1.Member {
	out := make([]sluicev1.Member, n)
	for i := range out {
		out[i] = sluicev1.Member{
			ID:             "m" + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Endpoint:       "http://127.0.0.1:" + string(rune('1'+i/10)) + string(rune('0'+i%10)) + "00",
			MaxConcurrency: ptr(1),
		}
	}
	return out
}

// Rows returns the validation cases.
func Rows() []Row {
	return []Row{
		// Valid objects.
		{Desc: "valid capacity tier", Mutate: func(*sluicev1.ReplicaTier) {}},
		{Desc: "valid upstream model Alias", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.UpstreamModel = sluicev1.UpstreamModelAlias }},
		{Desc: "valid upstream model ServedModel", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.UpstreamModel = sluicev1.UpstreamModelServedModel
		}},
		{Desc: "valid member locality Any", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.MemberLocality = sluicev1.MemberLocalityAny }},
		{Desc: "valid member locality SameHost", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.MemberLocality = sluicev1.MemberLocalitySameHost
		}},
		{Desc: "valid direct tier without strategy or ceiling", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = ""
			t.Spec.Members = t.Spec.Members[:1]
			t.Spec.Members[0].MaxConcurrency = nil
		}},
		{Desc: "valid round robin tier without ceilings", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = sluicev1.StrategyRoundRobin
			t.Spec.Members = append(t.Spec.Members, sluicev1.Member{ID: "gpu2", Endpoint: "http://127.0.0.1:8003"})
			for i := range t.Spec.Members {
				t.Spec.Members[i].MaxConcurrency = nil
			}
		}},
		{Desc: "valid replica tier with no strategy and one ceiling", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = ""
			t.Spec.Members[1].MaxConcurrency = nil
		}},
		{Desc: "valid tier ceiling at its bounds", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.MaxConcurrency = ptr(100000)
			t.Spec.Members[1].MaxConcurrency = ptr(1)
		}},
		{Desc: "valid sixteen members", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members = members(16) }},
		{Desc: "valid 32-character member id", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].ID = "a" + strings.Repeat("0", 30) + "z"
		}},
		{Desc: "valid IPv6 and localhost endpoints", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Endpoint = "http://[::1]:8001"
			t.Spec.Members[1].Endpoint = "https://localhost:8443/"
		}},
		{Desc: "valid metrics engine and path", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[1].Metrics = &sluicev1.MetricsSpec{Engine: sluicev1.EngineSGLang, Path: "/prom/metrics"}
		}},
		{Desc: "valid TensorRT-LLM engines", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Engine = sluicev1.EngineTritonTRTLLM
			t.Spec.Members[1].Metrics = &sluicev1.MetricsSpec{Engine: sluicev1.EngineTRTLLMServe, Path: "/prometheus/metrics"}
		}},
		{Desc: "valid named series without an engine, four matchers at most", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[1].Metrics = &sluicev1.MetricsSpec{Series: &sluicev1.SeriesSpec{
				Running: `srv_requests{state="running"}`,
				Waiting: "srv:queue_size",
				KVUsage: `_kv{a="",b="x y",c="!#[]~{},=",d="model/v1"}`,
			}}
		}},
		{Desc: "valid named series replacing one of an engine's", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{KVUsage: "vllm:gpu_cache_usage_perc"}
		}},
		{Desc: "valid named series of 256 bytes", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: sluicev1.SeriesSelector(strings.Repeat("a", 256))}
		}},
		{Desc: "valid upstream timeouts at their bounds", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Upstream = &sluicev1.UpstreamSpec{ResponseHeaderTimeout: dur(time.Second), IdleTimeout: dur(time.Hour)}
		}},
		{Desc: "valid tier and member quiesce", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: "maintenance", Members: map[string]sluicev1.QuiesceReason{"gpu1": "driver-upgrade"}}
		}},

		// Field bounds and patterns.
		{Desc: "empty node name", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.NodeName = "" },
			WantErrors: []string{"spec.nodeName"}},
		{Desc: "no aliases", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Aliases = []string{} },
			WantErrors: []string{"spec.aliases", "at least 1"}},
		{Desc: "seventeen aliases", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Aliases = nil
			for i := range 17 {
				t.Spec.Aliases = append(t.Spec.Aliases, "a"+string(rune('a'+i)))
			}
		}, WantErrors: []string{"spec.aliases", "must have at most 16 items"}},
		{Desc: "duplicate alias", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Aliases = []string{"chat", "chat"} },
			WantErrors: []string{"spec.aliases[1]", "Duplicate value"}},
		{Desc: "alias with a space", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Aliases = []string{"bad alias"} },
			WantErrors: []string{"spec.aliases[0]", "should match"}},
		{Desc: "empty served model", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.ServedModel = "" },
			WantErrors: []string{"spec.servedModel"}},
		{Desc: "unknown strategy", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Strategy = "Fastest" },
			WantErrors: []string{"spec.strategy", "Unsupported value"}},
		{Desc: "unknown upstream model", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.UpstreamModel = "Caller" },
			WantErrors: []string{"spec.upstreamModel", "Unsupported value"}},
		{Desc: "unknown member locality", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.MemberLocality = "SameNode" },
			WantErrors: []string{"spec.memberLocality", "Unsupported value"}},
		{Desc: "tier ceiling zero", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.MaxConcurrency = ptr(0) },
			WantErrors: []string{"spec.maxConcurrency", "greater than or equal to 1"}},
		{Desc: "tier ceiling above bound", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.MaxConcurrency = ptr(100001) },
			WantErrors: []string{"spec.maxConcurrency", "less than or equal to 100000"}},
		{Desc: "no members", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members = []sluicev1.Member{} },
			WantErrors: []string{"spec.members", "at least 1"}},
		{Desc: "seventeen members", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members = members(17) },
			WantErrors: []string{"spec.members", "must have at most 16 items"}},
		{Desc: "duplicate member id", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[1].ID = "gpu0" },
			WantErrors: []string{"spec.members[1]", "Duplicate value"}},
		{Desc: "member id with upper case", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].ID = "GPU0" },
			WantErrors: []string{"spec.members[0].id", "should match"}},
		{Desc: "member id ending in a hyphen", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].ID = "gpu-" },
			WantErrors: []string{"spec.members[0].id", "should match"}},
		{Desc: "member id of 33 characters", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].ID = "a" + strings.Repeat("0", 31) + "z"
		}, WantErrors: []string{"spec.members[0].id", "Too long"}},
		{Desc: "member ceiling zero", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].MaxConcurrency = ptr(0) },
			WantErrors: []string{"spec.members[0].maxConcurrency", "greater than or equal to 1"}},
		{Desc: "member ceiling above bound", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[1].MaxConcurrency = ptr(100001) },
			WantErrors: []string{"spec.members[1].maxConcurrency", "less than or equal to 100000"}},
		{Desc: "unknown metrics engine", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Metrics.Engine = "triton" },
			WantErrors: []string{"spec.members[0].metrics.engine", "Unsupported value"}},
		{Desc: "metrics without engine or series", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Metrics = &sluicev1.MetricsSpec{} },
			WantErrors: []string{"spec.members[0].metrics", "metrics must name an engine or series"}},
		{Desc: "series naming no signal", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{}
		}, WantErrors: []string{"spec.members[0].metrics.series", "series must name running, waiting or kvUsage"}},
		{Desc: "series with five matchers", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: `a{b="1",c="2",d="3",e="4",f="5"}`}
		}, WantErrors: []string{"spec.members[0].metrics.series.running", "must be a Prometheus metric name with at most 4 label matchers"}},
		{Desc: "series with an unquoted label value", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Waiting: "nv_trt_llm_request_metrics{request_type=waiting}"}
		}, WantErrors: []string{"spec.members[0].metrics.series.waiting", "must be a Prometheus metric name"}},
		{Desc: "series with a regular expression matcher", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{KVUsage: `kv{a=~"x.*"}`}
		}, WantErrors: []string{"spec.members[0].metrics.series.kvUsage", "must be a Prometheus metric name"}},
		{Desc: "series metric name starting with a digit", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: "9lives"}
		}, WantErrors: []string{"spec.members[0].metrics.series.running", "must be a Prometheus metric name"}},
		{Desc: "series label value with a backslash", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: `a{b="c\\"}`}
		}, WantErrors: []string{"spec.members[0].metrics.series.running", "must be a Prometheus metric name"}},
		{Desc: "series with a space between matchers", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: `a{b="1", c="2"}`}
		}, WantErrors: []string{"spec.members[0].metrics.series.running", "must be a Prometheus metric name"}},
		{Desc: "series with empty braces", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Running: "a{}"}
		}, WantErrors: []string{"spec.members[0].metrics.series.running", "must be a Prometheus metric name"}},
		{Desc: "series of 257 bytes", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members[0].Metrics.Series = &sluicev1.SeriesSpec{Waiting: sluicev1.SeriesSelector(strings.Repeat("a", 257))}
		}, WantErrors: []string{"spec.members[0].metrics.series.waiting", "Too long"}},
		{Desc: "relative metrics path", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Metrics.Path = "metrics" },
			WantErrors: []string{"spec.members[0].metrics.path", "should match"}},

		// Endpoint rules.
		{Desc: "endpoint without scheme", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "127.0.0.1:8001" },
			WantErrors: []string{"spec.members[0].endpoint", "absolute http or https URL"}},
		{Desc: "endpoint with ftp scheme", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "ftp://127.0.0.1:8001" },
			WantErrors: []string{"spec.members[0].endpoint", "absolute http or https URL"}},
		{Desc: "endpoint with a DNS name", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "http://engine.internal:8001" },
			WantErrors: []string{"spec.members[0].endpoint", "localhost or an IP literal"}},
		{Desc: "endpoint with user info", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "http://user:pw@127.0.0.1:8001" },
			WantErrors: []string{"spec.members[0].endpoint", "user info, a query or a fragment"}},
		{Desc: "endpoint with a query", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "http://127.0.0.1:8001?x=1" },
			WantErrors: []string{"spec.members[0].endpoint", "user info, a query or a fragment"}},
		{Desc: "endpoint with a fragment", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "http://127.0.0.1:8001#f" },
			WantErrors: []string{"spec.members[0].endpoint", "user info, a query or a fragment"}},
		{Desc: "endpoint with a path", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[0].Endpoint = "http://127.0.0.1:8001/v1" },
			WantErrors: []string{"spec.members[0].endpoint", "must not have a path"}},

		// Timeouts.
		{Desc: "header timeout below a second", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Upstream = &sluicev1.UpstreamSpec{ResponseHeaderTimeout: dur(500 * time.Millisecond)}
		}, WantErrors: []string{"spec.upstream.responseHeaderTimeout", "between 1s and 1h"}},
		{Desc: "idle timeout above an hour", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Upstream = &sluicev1.UpstreamSpec{IdleTimeout: dur(2 * time.Hour)}
		}, WantErrors: []string{"spec.upstream.idleTimeout", "between 1s and 1h"}},

		// The admission queue.
		{Desc: "valid queue at its lower bounds", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 1, dur(10*time.Millisecond), 1)
		}},
		{Desc: "valid queue at its upper bounds", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 10000, dur(10*time.Minute), 10000)
		}},
		{Desc: "valid queue without a tenant share", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 64, dur(30*time.Second), 0)
		}},
		{Desc: "valid queue on a direct tier", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = ""
			t.Spec.Members = t.Spec.Members[:1]
			queue(t, 8, dur(2*time.Second), 4)
		}},
		{Desc: "queue without maxRequests", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 0, dur(time.Second), 0) },
			WantErrors: []string{"spec.queue.maxRequests: Required value"}},
		{Desc: "queue maxRequests negative", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, -1, dur(time.Second), 0) },
			WantErrors: []string{"spec.queue.maxRequests", "greater than or equal to 1"}},
		{Desc: "queue maxRequests above bound", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 10001, dur(time.Second), 0) },
			WantErrors: []string{"spec.queue.maxRequests", "less than or equal to 10000"}},
		{Desc: "queue without maxWait", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 8, nil, 0) },
			WantErrors: []string{"spec.queue.maxWait: Required value"}},
		{Desc: "queue maxWait just below 10ms", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 8, dur(10*time.Millisecond-time.Microsecond), 0)
		}, WantErrors: []string{"spec.queue.maxWait", "maxWait must be between 10ms and 10m"}},
		{Desc: "queue maxWait just above 10m", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 8, dur(10*time.Minute+time.Millisecond), 0)
		}, WantErrors: []string{"spec.queue.maxWait", "maxWait must be between 10ms and 10m"}},
		{Desc: "queue maxWait zero", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 8, dur(0), 0) },
			WantErrors: []string{"spec.queue.maxWait", "maxWait must be between 10ms and 10m"}},
		{Desc: "queue maxWait negative", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 8, dur(-time.Second), 0) },
			WantErrors: []string{"spec.queue.maxWait", "maxWait must be between 10ms and 10m"}},
		{Desc: "queue tenant share zero", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 8, dur(time.Second), 0)
			t.Spec.Queue.MaxRequestsPerTenant = ptr(0)
		}, WantErrors: []string{"spec.queue.maxRequestsPerTenant", "greater than or equal to 1"}},
		{Desc: "valid queue tenant share equal to maxRequests", Mutate: func(t *sluicev1.ReplicaTier) {
			queue(t, 8, dur(time.Second), 8)
		}},
		{Desc: "queue tenant share above maxRequests", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 8, dur(time.Second), 9) },
			WantErrors: []string{"spec.queue: Invalid value", "maxRequestsPerTenant must not exceed maxRequests"}},
		{Desc: "queue tenant share above bound", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 10000, dur(time.Second), 10001) },
			WantErrors: []string{"spec.queue.maxRequestsPerTenant", "less than or equal to 10000",
				"maxRequestsPerTenant must not exceed maxRequests"}},
		{Desc: "queue with every required field missing", Mutate: func(t *sluicev1.ReplicaTier) { queue(t, 0, nil, 0) },
			WantErrors: []string{"spec.queue.maxRequests: Required value", "spec.queue.maxWait: Required value"}},

		// Whole-spec rules.
		{Desc: "strategy on a direct tier", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Members = t.Spec.Members[:1]
		}, WantErrors: []string{"strategy must not be set on a direct tier"}},
		{Desc: "round robin on a direct tier", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = sluicev1.StrategyRoundRobin
			t.Spec.Members = t.Spec.Members[:1]
		}, WantErrors: []string{"strategy must not be set on a direct tier"}},
		{Desc: "capacity member without ceiling", Mutate: func(t *sluicev1.ReplicaTier) { t.Spec.Members[1].MaxConcurrency = nil },
			WantErrors: []string{"every member needs maxConcurrency when strategy is Capacity"}},
		{Desc: "quiesce key that is not a member", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Quiesce = &sluicev1.QuiesceSpec{Members: map[string]sluicev1.QuiesceReason{"gpu9": "maintenance"}}
		}, WantErrors: []string{"quiesce.members keys must be member ids"}},
		{Desc: "member quiesce on a direct tier", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = ""
			t.Spec.Members = t.Spec.Members[:1]
			t.Spec.Quiesce = &sluicev1.QuiesceSpec{Members: map[string]sluicev1.QuiesceReason{"gpu0": "maintenance"}}
		}, WantErrors: []string{"quiesce.members must be empty on a direct tier (one member): quiesce the tier instead"}},
		{Desc: "valid tier quiesce on a direct tier", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Strategy = ""
			t.Spec.Members = t.Spec.Members[:1]
			t.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: "maintenance"}
		}},
		{Desc: "quiesce member reason with upper case", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Quiesce = &sluicev1.QuiesceSpec{Members: map[string]sluicev1.QuiesceReason{"gpu1": "Maintenance"}}
		}, WantErrors: []string{"spec.quiesce.members.gpu1", "should match"}},
		{Desc: "quiesce tier reason with a space", Mutate: func(t *sluicev1.ReplicaTier) {
			t.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: "two words"}
		}, WantErrors: []string{"spec.quiesce.tier", "should match"}},
	}
}

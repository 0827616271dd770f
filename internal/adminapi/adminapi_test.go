package adminapi

import (
	"encoding/json"
	"testing"
)

// roundTrip encodes v, checks the JSON is golden and decodes it back into
// a fresh value of the same type, which must encode the same.
func roundTrip[T any](t *testing.T, v T, golden string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != golden {
		t.Fatalf("JSON\n got %s\nwant %s", b, golden)
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != golden {
		t.Fatalf("decoded and encoded again: %s", again)
	}
}

// TestWireNames pins every field name of the admin API's bodies: a renamed
// JSON tag breaks every client, so it must fail here first.
func TestWireNames(t *testing.T) {
	four, two, ten := 4, 2, 10
	ppm := int64(250000)
	roundTrip(t, CapacityView{Tiers: []TierCapacity{{
		Tier: "ns/llama", Strategy: "Capacity", ServedModel: "meta/llama", Active: 1, MaxConcurrency: &four, State: "admitting", Draining: false, Removed: false,
		Queue: TierQueue{MaxRequests: &ten, Waiting: 3, OldestWaitMillis: 1500},
		Members: []MemberCapacity{{ID: "gpu0", Active: 1, MaxConcurrency: &two, State: "admitting", Phase: "Admitting", Draining: false, Ready: true,
			Pressure: &MemberPressure{Freshness: "fresh", PPM: &ppm, RequestState: "ok", KVState: "ok"}}},
	}}}, `{"tiers":[{"tier":"ns/llama","strategy":"Capacity","served_model":"meta/llama","active":1,"max_concurrency":4,"state":"admitting","draining":false,"removed":false,`+
		`"queue":{"max_requests":10,"waiting":3,"oldest_wait_ms":1500},`+
		`"members":[{"id":"gpu0","active":1,"max_concurrency":2,"state":"admitting","phase":"Admitting","draining":false,"ready":true,`+
		`"pressure":{"freshness":"fresh","pressure_ppm":250000,"requests_state":"ok","kv_state":"ok"}}]}]}`)

	eight, three := int32(8), int32(3)
	roundTrip(t, TiersView{Loaded: true, Tiers: []TierView{{
		Tier: "ns/llama", File: "llama.yaml", Served: true, Aliases: []string{"llama"}, ServedModel: "meta/llama", Strategy: "Capacity",
		MaxConcurrency: &eight, Members: []MemberView{{ID: "gpu0", MaxConcurrency: &three, MetricsEngine: "vllm"}},
		ResponseHeaderTimeout: "2m0s", IdleTimeout: "1m0s", Quiesce: QuiesceView{Tier: "maintenance", Members: map[string]string{"gpu0": "drain"}},
		Rejection: &RejectionView{Reason: "Invalid", Message: "bad"}, SourceError: "unreadable", ApplyError: "refused",
	}}, SourceErrors: []SourceErrorView{{File: "x.yaml", Message: "not YAML"}}},
		`{"loaded":true,"tiers":[{"tier":"ns/llama","file":"llama.yaml","served":true,"aliases":["llama"],"served_model":"meta/llama",`+
			`"strategy":"Capacity","max_concurrency":8,"members":[{"id":"gpu0","max_concurrency":3,"metrics_engine":"vllm"}],`+
			`"response_header_timeout":"2m0s","idle_timeout":"1m0s","quiesce":{"tier":"maintenance","members":{"gpu0":"drain"}},`+
			`"rejection":{"reason":"Invalid","message":"bad"},"source_error":"unreadable","apply_error":"refused"}],`+
			`"source_errors":[{"file":"x.yaml","message":"not YAML"}]}`)

	// A tier without a queue has no bound.
	roundTrip(t, TierQueue{}, `{"waiting":0,"oldest_wait_ms":0}`)

	roundTrip(t, DrainView{Tier: "ns/llama", Member: "gpu0", Drained: true}, `{"tier":"ns/llama","member":"gpu0","drained":true}`)
}

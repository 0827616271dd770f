package evidence

import (
	"encoding/json"
	"errors"
	"testing"
)

// schedulerOf returns the replica_scheduler object of a decoded record.
func schedulerOf(m map[string]any) map[string]any { return m["replica_scheduler"].(map[string]any) }

// rows returns the score rows of a decoded record.
func rows(m map[string]any) []any { return schedulerOf(m)["scores"].([]any) }

// row returns score row i of a decoded record.
func row(m map[string]any, i int) map[string]any { return rows(m)[i].(map[string]any) }

// TestMalformedSchedulerIngestion feeds captured records whose
// replica_scheduler is malformed or inconsistent in every way the contract
// names, and checks each is rejected as scheduler evidence while the legacy
// part of the record is preserved exactly.
func TestMalformedSchedulerIngestion(t *testing.T) {
	tests := map[string]func(m map[string]any){
		"extra key":           func(m map[string]any) { schedulerOf(m)["cursor"] = 2 },
		"extra score key":     func(m map[string]any) { row(m, 0)["endpoint"] = "http://127.0.0.1:8001" },
		"missing key":         func(m map[string]any) { delete(schedulerOf(m), "eligible_ids") },
		"missing score key":   func(m map[string]any) { delete(row(m, 1), "rotating_rank") },
		"missing ppm key":     func(m map[string]any) { delete(row(m, 0), "upstream_ppm") },
		"key case differs":    func(m map[string]any) { s := schedulerOf(m); s["Reason"] = s["reason"]; delete(s, "reason") },
		"17 rows":             func(m map[string]any) { setRows(m, 17) },
		"17 eligible ids":     func(m map[string]any) { setEligible(m, 17) },
		"duplicate member":    func(m map[string]any) { row(m, 2)["member_id"] = "gpu0" },
		"duplicate eligible":  func(m map[string]any) { schedulerOf(m)["eligible_ids"] = []any{"gpu0", "gpu0", "gpu1"} },
		"unsorted eligible":   func(m map[string]any) { schedulerOf(m)["eligible_ids"] = []any{"gpu1", "gpu0", "gpu2"} },
		"eligible lacks row":  func(m map[string]any) { schedulerOf(m)["eligible_ids"] = []any{"gpu0", "gpu2", "gpu3"} },
		"unknown reason":      func(m map[string]any) { schedulerOf(m)["reason"] = "lucky" },
		"unknown freshness":   func(m map[string]any) { row(m, 2)["upstream_freshness"] = "vintage" },
		"no-eligible reason":  func(m map[string]any) { schedulerOf(m)["reason"] = "no-eligible-member" },
		"selected not first":  func(m map[string]any) { schedulerOf(m)["selected_member_id"] = "gpu0" },
		"selected not member": func(m map[string]any) { swapFirstRows(m); schedulerOf(m)["selected_member_id"] = "gpu0" },
		"rows out of order":   func(m map[string]any) { r := rows(m); r[1], r[2] = r[2], r[1] },
		"fresh without ppm":   func(m map[string]any) { row(m, 1)["upstream_ppm"] = nil },
		"stale with ppm":      func(m map[string]any) { row(m, 0)["upstream_ppm"] = 0 },
		"unknown with ppm":    func(m map[string]any) { row(m, 2)["upstream_ppm"] = 10 },
		"unknown flag wrong":  func(m map[string]any) { row(m, 1)["upstream_unknown"] = true },
		"ppm out of range":    func(m map[string]any) { row(m, 1)["upstream_ppm"] = 3e15 },
		"active at capacity":  func(m map[string]any) { row(m, 2)["local_active"] = 4 },
		"capacity zero":       func(m map[string]any) { row(m, 0)["local_capacity"] = 0 },
		"rank out of range":   func(m map[string]any) { row(m, 2)["rotating_rank"] = 16 },
		"rank duplicated":     func(m map[string]any) { row(m, 2)["rotating_rank"] = 3 },
		"member id invalid":   func(m map[string]any) { row(m, 2)["member_id"] = "GPU_2" },
		"wrong type: string count": func(m map[string]any) {
			row(m, 1)["local_active"] = "1"
		},
		"wrong type: float count":    func(m map[string]any) { row(m, 1)["local_active"] = 1.5 },
		"wrong type: bool as string": func(m map[string]any) { row(m, 0)["upstream_unknown"] = "true" },
		"wrong type: number id":      func(m map[string]any) { schedulerOf(m)["selected_member_id"] = 1 },
		"wrong type: ids object":     func(m map[string]any) { schedulerOf(m)["eligible_ids"] = map[string]any{"gpu0": true} },
		"wrong type: row array":      func(m map[string]any) { rows(m)[0] = []any{"gpu1", 0, 4} },
		"wrong type: string ppm":     func(m map[string]any) { row(m, 1)["upstream_ppm"] = "250000" },
		"null payload":               func(m map[string]any) { m["replica_scheduler"] = nil },
		"payload is a list":          func(m map[string]any) { m["replica_scheduler"] = []any{schedulerOf(m)} },
		"subclass-like wrapper": func(m map[string]any) {
			m["replica_scheduler"] = map[string]any{"__class__": "ReplicaDecisionSubclass", "decision": schedulerOf(m)}
		},
		"subclass-like score wrapper": func(m map[string]any) {
			rows(m)[0] = map[string]any{"ReplicaScore": rows(m)[0]}
		},
	}
	want := withoutScheduler(capacityRecord(t))
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			m := asMap(t, mustJSON(t, capacityRecord(t)))
			mutate(m)
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseRecord(data)
			if !errors.Is(err, ErrInvalidScheduler) || errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("ParseRecord err = %v, want ErrInvalidScheduler only", err)
			}
			if !sameRecord(got, want) {
				t.Fatalf("legacy part not preserved:\n got %+v\nwant %+v", got, want)
			}
			// The summary surface agrees: counted, without evidence.
			s, err := SummarizeJSONL(bytesReader(append(data, '\n')))
			if err != nil || s.Records != 1 || s.InvalidScheduler != 1 || len(s.WinnerFreshness) != 0 || s.InvalidRecords != 0 {
				t.Fatalf("SummarizeJSONL = %+v, %v", s, err)
			}
		})
	}
	// Control: the unmutated record keeps its payload.
	if got, err := ParseRecord(mustJSON(t, capacityRecord(t))); err != nil || got.Scheduler == nil {
		t.Fatalf("control: %+v, %v", got, err)
	}
}

// setRows makes the payload n rows long by repeating the last one, with
// eligible ids to match.
func setRows(m map[string]any, n int) {
	s := schedulerOf(m)
	r := rows(m)
	for len(r) < n {
		r = append(r, r[len(r)-1])
	}
	s["scores"] = r
	setEligible(m, n)
}

// setEligible makes the eligible id list n long.
func setEligible(m map[string]any, n int) {
	ids := make([]any, n)
	for i := range ids {
		ids[i] = "m" + string(rune('a'+i))
	}
	schedulerOf(m)["eligible_ids"] = ids
}

// swapFirstRows swaps the first two score rows.
func swapFirstRows(m map[string]any) {
	r := rows(m)
	r[0], r[1] = r[1], r[0]
}

package evidence

import (
	"bytes"
	"encoding/json"
	"testing"
)

// summarize counts records as the decision log and SummarizeJSONL do.
func summarize(records []Record) Summary {
	var z summarizer
	for i := range records {
		z.add(&records[i])
	}
	return z.summary()
}

func TestSummarize(t *testing.T) {
	rr := streamedRecord("req-rr-1", StreamTruncated)
	bad := capacityRecord(t)
	bad.Member = "gpu0" // the payload no longer matches the attempt.
	s := summarize([]Record{capacityRecord(t), capacityRecord(t), rr, notAdmittedRecord(), refusedRecord(), bad})
	want := Summary{
		Records:          6,
		Outcomes:         map[string]int{"admitted": 4, "not_admitted": 1, "refused": 1},
		Tiers:            map[string]int{"inference/llama-70b": 4, "inference/rr": 1},
		Members:          map[string]map[string]int{"inference/llama-70b": {"gpu1": 2, "gpu0": 1}, "inference/rr": {"gpu0": 1}},
		StreamOutcomes:   map[string]int{"complete": 3, "truncated": 1},
		RefusalReasons:   map[string]int{"capacity_exhausted": 1, "model_not_found": 1},
		WinnerFreshness:  map[string]int{"stale": 2},
		InvalidScheduler: 1,
	}
	if got, _ := json.Marshal(s); string(got) != string(mustMarshal(t, want)) {
		t.Fatalf("Summarize\n got %s\nwant %s", got, mustMarshal(t, want))
	}
	empty, _ := json.Marshal(summarize(nil))
	if string(empty) != `{"records":0,"outcomes":{},"tiers":{},"members":{},"stream_outcomes":{},"refusal_reasons":{},"winner_freshness":{},"invalid_records":0,"invalid_scheduler":0}` {
		t.Fatalf("empty summary %s", empty)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSummarizeJSONL ingests a captured file with good lines, a line
// rejected whole, a line whose payload is dropped, an overlong line, blank
// lines, CRLF and no final newline.
func TestSummarizeJSONL(t *testing.T) {
	var buf bytes.Buffer
	c := capacityRecord(t)
	line, _ := c.AppendJSON(nil)
	buf.Write(line)
	buf.WriteString("\n")
	buf.WriteString(`{"request_id":"x","extra":1}` + "\n")
	m := asMap(t, mustJSON(t, c))
	row(m, 0)["upstream_ppm"] = 7 // stale with a PPM.
	damaged, _ := json.Marshal(m)
	buf.Write(damaged)
	buf.WriteString("\r\n")
	buf.WriteString(`{"pad":"` + string(bytes.Repeat([]byte("y"), 2*MaxLineBytes)) + `"}` + "\n")
	r := refusedRecord()
	tail, _ := r.AppendJSON(nil)
	buf.Write(bytes.TrimSuffix(tail, []byte("\n")))

	s, err := SummarizeJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != 3 || s.InvalidRecords != 2 || s.InvalidScheduler != 1 || s.WinnerFreshness["stale"] != 1 ||
		s.Outcomes["admitted"] != 2 || s.Outcomes["refused"] != 1 {
		t.Fatalf("SummarizeJSONL = %+v", s)
	}
}

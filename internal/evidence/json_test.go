package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// TestCapacityRecordGolden pins the JSON of a Capacity decision record: the
// record keys, one attempt, and replica_scheduler with exactly the four
// decision fields and seven score fields, PPM null unless fresh.
func TestCapacityRecordGolden(t *testing.T) {
	r := capacityRecord(t)
	var buf bytes.Buffer
	if err := json.Indent(&buf, mustJSON(t, r), "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	golden(t, "capacity_record.golden", buf.Bytes())
}

// TestRecordsWithoutSchedulerGolden pins the JSON of the records that carry
// no scheduler payload: RoundRobin (or direct), admission refusal, gate
// refusal. replica_scheduler is absent, not null.
func TestRecordsWithoutSchedulerGolden(t *testing.T) {
	var lines []byte
	for _, r := range []Record{roundRobinRecord(), notAdmittedRecord(), refusedRecord()} {
		var err error
		if lines, err = r.AppendJSON(lines); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "plain_records.golden", lines)
	if bytes.Contains(lines, []byte("replica_scheduler")) {
		t.Fatal("a record without a payload serialized replica_scheduler")
	}
}

// TestAllowlist checks the serialized key sets are exactly the allowlists.
func TestAllowlist(t *testing.T) {
	m := asMap(t, mustJSON(t, capacityRecord(t)))
	withoutQueue := slices.DeleteFunc(slices.Clone(recordKeys), func(k string) bool { return k == keyQueue || k == keyQueuedUS })
	if got := sortedKeys(m); !slices.Equal(got, sorted(withoutQueue)) {
		t.Errorf("record keys %v, want %v: queue and queued_us only when the request met the queue", got, sorted(withoutQueue))
	}
	queued := capacityRecord(t)
	queued.Queue, queued.Queued = QueueAdmitted, time.Second
	if got := sortedKeys(asMap(t, mustJSON(t, queued))); !slices.Equal(got, sorted(recordKeys)) {
		t.Errorf("record keys of a queued record %v, want %v", got, sorted(recordKeys))
	}
	attempt := m["attempts"].([]any)[0].(map[string]any)
	optional := func(keys ...string) []string {
		return slices.DeleteFunc(slices.Clone(attemptKeys), func(k string) bool { return slices.Contains(keys, k) })
	}
	if got, want := sortedKeys(attempt), sorted(optional(keyEjection, keyProtocol)); !slices.Equal(got, want) {
		t.Errorf("attempt keys %v, want %v: ejection and protocol_error only when they happened", got, want)
	}
	ejected := capacityRecord(t)
	ejected.End, ejected.Status, ejected.Ejection = StreamUpstreamUnavailable, 502, EjectionRefused
	attempt = asMap(t, mustJSON(t, ejected))["attempts"].([]any)[0].(map[string]any)
	if got := sortedKeys(attempt); !slices.Equal(got, sorted(optional(keyProtocol))) || attempt[keyEjection] != "connection_refused" {
		t.Errorf("ejected attempt %v, want every attempt key but protocol_error", attempt)
	}
	broken := capacityRecord(t)
	broken.End, broken.Status, broken.Protocol = StreamUpstreamUnavailable, 502, ProtocolTooManyInformational
	attempt = asMap(t, mustJSON(t, broken))["attempts"].([]any)[0].(map[string]any)
	if got := sortedKeys(attempt); !slices.Equal(got, sorted(optional(keyEjection))) || attempt[keyProtocol] != "too_many_informational" {
		t.Errorf("attempt of a protocol error %v, want every attempt key but ejection", attempt)
	}
	sched := m["replica_scheduler"].(map[string]any)
	if got := sortedKeys(sched); !slices.Equal(got, sorted(schedulerKeys)) {
		t.Errorf("scheduler keys %v", got)
	}
	for _, row := range sched["scores"].([]any) {
		if got := sortedKeys(row.(map[string]any)); !slices.Equal(got, sorted(scoreKeys)) {
			t.Errorf("score keys %v", got)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestRoundTrip checks that ParseRecord reads back exactly what
// MarshalJSON wrote, for every kind of record.
func TestRoundTrip(t *testing.T) {
	truncated, malformed := streamedRecord("req-truncated", StreamTruncated), streamedRecord("req-malformed", StreamMalformed)
	bodies := refusedRecord()
	bodies.RequestID, bodies.Code, bodies.Status = "req-bodies", CodeBodyBufferExhausted, 503
	for _, r := range []Record{capacityRecord(t), roundRobinRecord(), notAdmittedRecord(), refusedRecord(), bodies, truncated, malformed} {
		got, err := ParseRecord(mustJSON(t, r))
		if err != nil {
			t.Fatalf("%s: ParseRecord: %v", r.RequestID, err)
		}
		if !sameRecord(got, r) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", r.RequestID, got, r)
		}
	}
}

// streamedRecord is a RoundRobin record of a 200 stream that ended with end.
func streamedRecord(id string, end StreamOutcome) Record {
	r := roundRobinRecord()
	r.RequestID, r.Status, r.Code, r.End = id, 200, "", end
	r.FirstByte = r.Dispatch + time.Millisecond
	return r
}

// TestInvalidPayloadIsNotSerialized checks MarshalJSON applies the same
// check as every other surface: an invalid payload is left out and the
// rest of the record is unchanged.
func TestInvalidPayloadIsNotSerialized(t *testing.T) {
	for name, mutate := range invalidPayloads() {
		t.Run(name, func(t *testing.T) {
			r := capacityRecord(t)
			mutate(&r)
			if r.SchedulerValid() {
				t.Fatal("mutation left the payload valid")
			}
			if got, want := mustJSON(t, r), mustJSON(t, withoutScheduler(r)); !bytes.Equal(got, want) {
				t.Fatalf("got %s\nwant %s", got, want)
			}
		})
	}
}

// invalidPayloads are in-memory payloads every surface must drop.
func invalidPayloads() map[string]func(*Record) {
	return map[string]func(*Record){
		"selected is not the member": func(r *Record) { r.Member = "gpu0" },
		"selected is not the first row": func(r *Record) {
			r.Scheduler.SelectedMemberID = "gpu0"
			r.Member = "gpu0"
		},
		"no-eligible-member reason": func(r *Record) { r.Scheduler.Reason = "no-eligible-member" },
		"unknown reason":            func(r *Record) { r.Scheduler.Reason = "lucky" },
		"not admitted": func(r *Record) {
			r.Outcome, r.Code, r.Status = OutcomeNotAdmitted, CodeCapacityExhausted, 503
			r.Member, r.End, r.Dispatch, r.FirstByte = "", "", 0, 0
		},
		"duplicate member row":            func(r *Record) { r.Scheduler.Scores[1] = r.Scheduler.Scores[0] },
		"duplicate member, distinct rank": func(r *Record) { r.Scheduler.Scores[2].MemberID = "gpu0" },
		"eligible ids unsorted": func(r *Record) {
			ids := r.Scheduler.EligibleIDs
			ids[0], ids[1] = ids[1], ids[0]
		},
		"fresh PPM on a stale row": func(r *Record) { r.Scheduler.Scores[0].UpstreamPPM = 5 },
		"unknown freshness":        func(r *Record) { r.Scheduler.Scores[2].UpstreamFreshness = scheduler.Freshness(9) },
		"rank out of range":        func(r *Record) { r.Scheduler.Scores[2].RotatingRank = 16 },
		"seventeen rows": func(r *Record) {
			for len(r.Scheduler.Scores) < 17 {
				r.Scheduler.Scores = append(r.Scheduler.Scores, r.Scheduler.Scores[len(r.Scheduler.Scores)-1])
			}
		},
	}
}

// TestParseRecordRejectsLegacyDamage checks that damage outside the
// scheduler payload rejects the whole record.
func TestParseRecordRejectsLegacyDamage(t *testing.T) {
	base := func(t *testing.T) map[string]any { return asMap(t, mustJSON(t, capacityRecord(t))) }
	tests := map[string]func(m map[string]any){
		"extra key":              func(m map[string]any) { m["prompt"] = "hello" },
		"missing key":            func(m map[string]any) { delete(m, "tier") },
		"outcome unknown":        func(m map[string]any) { m["outcome"] = "maybe" },
		"status wrong type":      func(m map[string]any) { m["status"] = "200" },
		"status fraction":        func(m map[string]any) { m["status"] = 200.5 },
		"time not RFC 3339":      func(m map[string]any) { m["time"] = "yesterday" },
		"request id unsafe":      func(m map[string]any) { m["request_id"] = "http://10.0.0.1:8000/x" },
		"tier not namespaced":    func(m map[string]any) { m["tier"] = "llama" },
		"two attempts":           func(m map[string]any) { m["attempts"] = append(m["attempts"].([]any), m["attempts"].([]any)[0]) },
		"no attempt":             func(m map[string]any) { m["attempts"] = []any{} },
		"refusal on admitted":    func(m map[string]any) { m["refusal_reason"] = "capacity_exhausted" },
		"status class disagrees": func(m map[string]any) { attempt(m)["status_class"] = "5xx" },
		"stream outcome unknown": func(m map[string]any) { attempt(m)["stream_outcome"] = "finished" },
		"malformed on a 5xx": func(m map[string]any) {
			m["status"] = 503
			attempt(m)["status_class"], attempt(m)["stream_outcome"] = "5xx", "malformed"
		},
		"attempt extra key":      func(m map[string]any) { attempt(m)["url"] = "http://127.0.0.1:8001" },
		"attempt member invalid": func(m map[string]any) { attempt(m)["member_id"] = "GPU 0" },
		"attempt longer than the request": func(m map[string]any) {
			attempt(m)["duration_us"] = 10_000_000
		},
		"record is an array": nil,
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			var data []byte
			if mutate == nil {
				data = []byte(`[` + string(mustJSON(t, capacityRecord(t))) + `]`)
			} else {
				m := base(t)
				mutate(m)
				data, _ = json.Marshal(m)
			}
			r, err := ParseRecord(data)
			if !errors.Is(err, ErrInvalidRecord) || r != (Record{}) {
				t.Fatalf("ParseRecord = %+v, %v; want nothing and ErrInvalidRecord", r, err)
			}
		})
	}
}

func attempt(m map[string]any) map[string]any {
	return m["attempts"].([]any)[0].(map[string]any)
}

// TestParseRecordRejectsNonAdmittedInconsistency checks the refusal
// records' consistency rules.
func TestParseRecordRejectsNonAdmittedInconsistency(t *testing.T) {
	tests := map[string]struct {
		r      Record
		mutate func(m map[string]any)
	}{
		"gate reason on not admitted": {notAdmittedRecord(), func(m map[string]any) { m["refusal_reason"] = CodeModelNotFound }},
		"admission reason on refused": {refusedRecord(), func(m map[string]any) { m["refusal_reason"] = CodeTierQuiesced }},
		"refused with a tier":         {refusedRecord(), func(m map[string]any) { m["tier"] = "ns/x" }},
		"not admitted with 200":       {notAdmittedRecord(), func(m map[string]any) { m["status"] = 200 }},
		"refused with an attempt": {refusedRecord(), func(m map[string]any) {
			m["attempts"] = []any{map[string]any{"member_id": "gpu0", "status_class": "4xx", "duration_us": 1, "first_byte_us": nil, "stream_outcome": "complete"}}
		}},
		"unknown refusal reason":   {refusedRecord(), func(m map[string]any) { m["refusal_reason"] = "teapot" }},
		"4xx gate reason with 503": {refusedRecord(), func(m map[string]any) { m["status"] = 503 }},
		"body budget with 413": {refusedRecord(), func(m map[string]any) {
			m["refusal_reason"], m["status"] = CodeBodyBufferExhausted, 413
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m := asMap(t, mustJSON(t, tt.r))
			tt.mutate(m)
			data, _ := json.Marshal(m)
			if _, err := ParseRecord(data); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("ParseRecord err = %v, want ErrInvalidRecord", err)
			}
		})
	}
}

// TestParseRecordSyntax covers what a generic decoder would let through:
// case-insensitive key matches, duplicate keys, trailing data, null for a
// string and an overlong line.
func TestParseRecordSyntax(t *testing.T) {
	good := string(mustJSON(t, notAdmittedRecord()))
	for name, data := range map[string]string{
		"key case differs": `{"Request_ID"` + good[len(`{"request_id"`):],
		"duplicate key":    good[:len(good)-1] + `,"status":503}`,
		"trailing data":    good + ` {}`,
		"null string":      `{"request_id":null` + good[len(`{"request_id":"req-full-1"`):],
		"not JSON":         `{"request_id":`,
		"overlong":         good[:len(good)-1] + `,"pad":"` + string(bytes.Repeat([]byte("x"), MaxLineBytes)) + `"}`,
		"empty":            ``,
		"top-level string": `"record"`,
		"nested wrapper":   `{"record":` + good + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseRecord([]byte(data)); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("ParseRecord(%.80q) err = %v, want ErrInvalidRecord", data, err)
			}
		})
	}
	if _, err := ParseRecord([]byte(good)); err != nil {
		t.Fatalf("control: %v", err)
	}
}

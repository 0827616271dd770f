//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/evidence"
)

// recordStart is the fixtures' arrival time.
var recordStart = time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)

// servedRecord is the record of a streamed request a member served after
// it waited queued in the queue (zero: admitted at once, no queue key).
func servedRecord(id string, queued time.Duration) evidence.Record {
	r := evidence.Record{
		RequestID: id, Time: recordStart, Duration: queued + 700*time.Millisecond, Alias: aliasTenants, Tier: "bench/tq",
		Outcome: evidence.OutcomeAdmitted, Status: 200, Member: "m1",
		Dispatch: queued + 100*time.Microsecond, FirstByte: queued + time.Millisecond, End: evidence.StreamComplete,
	}
	if queued > 0 {
		r.Queue, r.Queued = evidence.QueueAdmitted, queued
	}
	return r
}

// queueRefusalRecord is the record of a request the queue refused after
// queued.
func queueRefusalRecord(id string, q evidence.QueueOutcome, code string, status int, queued time.Duration) evidence.Record {
	return evidence.Record{
		RequestID: id, Time: recordStart, Duration: queued + 50*time.Microsecond, Alias: aliasTenants, Tier: "bench/tq",
		Outcome: evidence.OutcomeNotAdmitted, Code: code, Status: status, Queue: q, Queued: queued,
	}
}

// tenantRecords are one tenant's records: two admitted at once, two that
// waited 100 and 900 ms, one that waited the whole maxWait, and two that
// met a full queue.
func tenantRecords() []evidence.Record {
	return []evidence.Record{
		servedRecord("req-1", 0),
		servedRecord("req-2", 0),
		servedRecord("req-3", 100*time.Millisecond),
		servedRecord("req-4", 900*time.Millisecond),
		queueRefusalRecord("req-5", evidence.QueueTimeout, evidence.CodeQueueTimeout, 503, 30*time.Second),
		queueRefusalRecord("req-6", evidence.QueueFull, evidence.CodeQueueFull, 429, 0),
		queueRefusalRecord("req-7", evidence.QueueFull, evidence.CodeQueueFull, 429, 0),
	}
}

// byID indexes records by request id.
func byID(rs []evidence.Record) map[string]evidence.Record {
	out := map[string]evidence.Record{}
	for _, r := range rs {
		out[r.RequestID] = r
	}
	return out
}

// seenOf returns the responses the client got for the records.
func seenOf(rs []evidence.Record) []seenResponse {
	out := make([]seenResponse, len(rs))
	for i, r := range rs {
		out[i] = seenResponse{ID: r.RequestID, Status: r.Status}
	}
	return out
}

func TestJoinQueueWait(t *testing.T) {
	rs := tenantRecords()
	qw, err := joinQueueWait(seenOf(rs), 0, byID(rs), 2)
	if err != nil {
		t.Fatal(err)
	}
	// Five requests did not meet a full queue: 0, 0, 100 ms, 900 ms, 30 s.
	if qw.Records != 7 || qw.QueueFull != 2 || qw.Waited != 3 || qw.Wait.Count != 5 {
		t.Fatalf("counts = %+v, want 7 records, 2 queue_full, 3 waited, 5 waits", qw)
	}
	if qw.Wait.Min != 0 || qw.Wait.P50 != 100*time.Millisecond || qw.Wait.P99 != 30*time.Second {
		t.Fatalf("wait = %+v, want min 0, p50 100ms, p99 30s", qw.Wait)
	}

	// A record the router wrote for another client is not joined.
	other := append(tenantRecords(), servedRecord("req-other", time.Minute))
	if qw2, err := joinQueueWait(seenOf(rs), 0, byID(other), 2); err != nil || qw2.Wait.Max != 30*time.Second || qw2.Records != 7 {
		t.Fatalf("with another client's record: %+v, %v", qw2, err)
	}

	for _, tc := range []struct {
		name         string
		seen         []seenResponse
		unidentified int
		records      map[string]evidence.Record
		queueFull    int
		want         error
	}{
		{name: "response without a record", seen: append(seenOf(rs), seenResponse{ID: "req-8", Status: 200}),
			records: byID(rs), queueFull: 2, want: errRecordMissing},
		{name: "status differs", seen: append(seenOf(rs[:6]), seenResponse{ID: "req-7", Status: 503}),
			records: byID(rs), queueFull: 2, want: errRecordMismatch},
		{name: "client read fewer queue_full", seen: seenOf(rs), records: byID(rs), queueFull: 1, want: errRecordMismatch},
		{name: "client read more queue_full", seen: seenOf(rs), records: byID(rs), queueFull: 3, want: errRecordMismatch},
		{name: "unidentified response", seen: seenOf(rs), unidentified: 1, records: byID(rs), queueFull: 2, want: errResponseUnidentified},
		{name: "only queue_full", seen: seenOf(rs[5:]), records: byID(rs), queueFull: 2, want: errNoSamples},
		{name: "nothing seen", records: byID(rs), want: errNoSamples},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := joinQueueWait(tc.seen, tc.unidentified, tc.records, tc.queueFull); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// jsonl encodes the records as the router's decision log does.
func jsonl(t *testing.T, rs ...evidence.Record) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range rs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestScanDecisions(t *testing.T) {
	rs := tenantRecords()
	wanted := map[string]bool{"req-3": true, "req-6": true, "req-missing": true}
	into := map[string]evidence.Record{}
	data := append(jsonl(t, rs...), "\r\n\n"...)
	if err := scanDecisions(bytes.NewReader(data), wanted, into); err != nil {
		t.Fatal(err)
	}
	if len(into) != 2 || into["req-3"].Queued != 100*time.Millisecond || into["req-3"].Queue != evidence.QueueAdmitted ||
		into["req-6"].Queue != evidence.QueueFull || into["req-6"].Status != 429 {
		t.Fatalf("records = %+v, want req-3 and req-6 as written", into)
	}
	// The last line may end without a newline.
	into = map[string]evidence.Record{}
	if err := scanDecisions(bytes.NewReader(bytes.TrimSuffix(jsonl(t, rs[2]), []byte("\n"))), wanted, into); err != nil || len(into) != 1 {
		t.Fatalf("unterminated last line: %v, %d records", err, len(into))
	}

	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{name: "not a record", data: append(jsonl(t, rs[0]), `{"request_id":"req-3"}`+"\n"...), want: evidence.ErrInvalidRecord},
		{name: "truncated line", data: jsonl(t, rs[2])[:40], want: evidence.ErrInvalidRecord},
		{name: "overlong line", data: append(bytes.Repeat([]byte("x"), evidence.MaxLineBytes+1), '\n'), want: evidence.ErrInvalidRecord},
		{name: "wanted id twice", data: jsonl(t, rs[2], rs[0], rs[2]), want: errDuplicateRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := scanDecisions(bytes.NewReader(tc.data), wanted, map[string]evidence.Record{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReadDecisionLog(t *testing.T) {
	rs := tenantRecords()
	wanted := wantedIDs(seenOf(rs))
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.jsonl")
	if _, err := readDecisionLog(path, wanted); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing log gave %v, want os.ErrNotExist", err)
	}
	// Without a rotated file.
	if err := os.WriteFile(path, jsonl(t, rs...), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readDecisionLog(path, wanted)
	if err != nil || len(got) != len(rs) {
		t.Fatalf("read %d records (%v), want %d", len(got), err, len(rs))
	}
	// Rotated: the older records in path.1.
	if err := os.WriteFile(path+".1", jsonl(t, rs[:3]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, jsonl(t, rs[3:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = readDecisionLog(path, wanted)
	if err != nil {
		t.Fatal(err)
	}
	if qw, err := joinQueueWait(seenOf(rs), 0, got, 2); err != nil || qw.Records != len(rs) || qw.Waited != 3 {
		t.Fatalf("join over both files = %+v, %v", qw, err)
	}
	// A record in both files is a duplicate, and the error names the file.
	if err := os.WriteFile(path, jsonl(t, rs[2:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readDecisionLog(path, wanted); !errors.Is(err, errDuplicateRecord) || !strings.Contains(err.Error(), path+":") {
		t.Fatalf("a record in both files gave %v, want errDuplicateRecord naming %s", err, path)
	}
}

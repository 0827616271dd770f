//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

// Bounds of the join between the client's responses and the router's
// decision records.
const (
	// maxSeenResponses bounds the responses whose request id one probe
	// keeps: as many as loadgen keeps latency samples, far above the few
	// thousand requests of a run.
	maxSeenResponses = loadgen.MaxSamples
	// maxSeenIDBytes bounds a kept X-Request-Id: the router keeps ids of
	// at most 64 bytes (docs/ROUTER.md), so a longer one is not its own.
	maxSeenIDBytes = 64
)

// Errors of the join.
var (
	// errRecordMissing reports a response whose request id has no record
	// in the router's decision log.
	errRecordMissing = errors.New("harness: response without a decision record")
	// errRecordMismatch reports a record that disagrees with the response
	// the client got.
	errRecordMismatch = errors.New("harness: decision record disagrees with the response")
	// errResponseUnidentified reports a response the probe could not name
	// by request id.
	errResponseUnidentified = errors.New("harness: response without a usable X-Request-Id")
	// errDuplicateRecord reports two records with one request id.
	errDuplicateRecord = errors.New("harness: two decision records with one request id")
)

// seenResponse is one response a probe saw: the request id the router
// gave it and its status.
type seenResponse struct {
	// ID is the response's X-Request-Id.
	ID string
	// Status is its HTTP status.
	Status int
}

// queueWait is one tenant's time in the router's admission queue, read from
// the router's own decision records.
type queueWait struct {
	// Wait is the time queued (the record's queued_us) of every request
	// that did not meet a full queue on arrival: a request admitted at once
	// has no queue key in its record and counts as 0; one that waited
	// counts its queued_us whatever its end (milliseconds in JSON).
	Wait loadgen.Summary `json:"wait"`
	// Waited counts the requests that waited in the queue at all (a
	// record with queue set, other than queue_full).
	Waited int `json:"waited"`
	// QueueFull counts the records with queue queue_full.
	QueueFull int `json:"queue_full"`
	// Records counts the records joined: every response the client got.
	Records int `json:"records"`
}

// joinQueueWait joins the responses one client saw with the router's
// records by request id and summarizes the time queued. Every response
// must have exactly one record whose status is the response's, and the
// queue_full records must be exactly the client's 429 queue_full
// responses (clientQueueFull), or the figures would describe only part of
// the load.
func joinQueueWait(seen []seenResponse, unidentified int, records map[string]evidence.Record, clientQueueFull int) (queueWait, error) {
	var qw queueWait
	if unidentified > 0 {
		return qw, fmt.Errorf("%w: %d responses", errResponseUnidentified, unidentified)
	}
	var wait loadgen.Distribution
	for _, s := range seen {
		r, ok := records[s.ID]
		if !ok {
			return qw, fmt.Errorf("%w: request %s (status %d)", errRecordMissing, s.ID, s.Status)
		}
		if r.Status != s.Status {
			return qw, fmt.Errorf("%w: request %s: status %d in the record, %d at the client", errRecordMismatch, s.ID, r.Status, s.Status)
		}
		qw.Records++
		switch r.Queue {
		case evidence.QueueFull:
			qw.QueueFull++
			continue
		case "":
		default:
			qw.Waited++
		}
		wait.Add(r.Queued)
	}
	if qw.QueueFull != clientQueueFull {
		return qw, fmt.Errorf("%w: %d queue_full records, %d 429 queue_full responses at the client", errRecordMismatch, qw.QueueFull, clientQueueFull)
	}
	if wait.Count() == 0 {
		return qw, fmt.Errorf("queue wait: %w", errNoSamples)
	}
	qw.Wait = wait.Summary()
	return qw, nil
}

// scanDecisions reads a JSONL decision log (the router's
// --decision-log-file) and puts into into the records whose request id is
// in wanted. Every line must be a record ParseRecord accepts (a record
// whose scheduler payload it drops is kept: the queue fields stand); a
// wanted id seen twice is an error. Empty lines are skipped.
func scanDecisions(r io.Reader, wanted map[string]bool, into map[string]evidence.Record) error {
	br := bufio.NewReaderSize(r, evidence.MaxLineBytes+1)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return fmt.Errorf("decision log line %d: %w: longer than %d bytes", n, evidence.ErrInvalidRecord, evidence.MaxLineBytes)
		case err != nil && !errors.Is(err, io.EOF):
			return fmt.Errorf("decision log: %w", err)
		}
		if body := trimLine(line); len(body) > 0 {
			rec, perr := evidence.ParseRecord(body)
			if perr != nil && !errors.Is(perr, evidence.ErrInvalidScheduler) {
				return fmt.Errorf("decision log line %d: %w", n, perr)
			}
			if wanted[rec.RequestID] {
				if _, dup := into[rec.RequestID]; dup {
					return fmt.Errorf("%w: %s", errDuplicateRecord, rec.RequestID)
				}
				into[rec.RequestID] = rec
			}
		}
		if err != nil { // io.EOF
			return nil
		}
	}
}

// trimLine removes a trailing "\n" or "\r\n".
func trimLine(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// readDecisionLog reads the records of the wanted request ids from the
// router's decision log path and, when the router rotated it, path.1
// (older records first).
func readDecisionLog(path string, wanted map[string]bool) (map[string]evidence.Record, error) {
	into := map[string]evidence.Record{}
	for _, p := range []string{path + ".1", path} {
		f, err := os.Open(p) //nolint:gosec // the harness's own work directory.
		if errors.Is(err, os.ErrNotExist) && p != path {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = scanDecisions(f, wanted, into)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return into, nil
}

// wantedIDs returns the request ids of the responses.
func wantedIDs(seen ...[]seenResponse) map[string]bool {
	out := map[string]bool{}
	for _, s := range seen {
		for _, r := range s {
			out[r.ID] = true
		}
	}
	return out
}

// queueFullKey is the refusal key of the queue's 429.
var queueFullKey = refusalKey(http.StatusTooManyRequests, string(evidence.QueueFull))

package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// Bounds of captured JSON that ParseRecord accepts.
const (
	// MaxLineBytes bounds one captured record. A record with a full
	// 16-row scheduler payload encodes to about 4 KiB; sixteen times that
	// leaves room without letting a hostile line cost more than a small
	// fixed amount to reject.
	MaxLineBytes = 64 << 10
	// maxRequestIDLength is the router's bound on a kept X-Request-Id.
	maxRequestIDLength = 64
	// maxAliasLength is the ReplicaTier bound on one alias.
	maxAliasLength = 128
	// maxDNSNameLength bounds a namespace or a name: a DNS subdomain name.
	maxDNSNameLength = 253
	// maxTierLength bounds namespace/name: two DNS subdomain names and a
	// slash.
	maxTierLength = maxDNSNameLength + 1 + maxDNSNameLength
	// maxDurationUS bounds a captured duration: a year, far above any
	// request's lifetime, and far below 2^53.
	maxDurationUS = int64(365 * 24 * time.Hour / time.Microsecond)
)

// ParseRecord decodes one captured JSON record strictly. Every object must
// have exactly its allowlisted keys (matched case-sensitively, each once;
// only replica_scheduler and the pair queue and queued_us are optional),
// every value its exact JSON type,
// lists their bounds (one attempt at most, 16 ids and score rows at most),
// strings their closed enum sets or id grammars, and the fields must agree
// with each other as the router writes them.
//
// An error wrapping ErrInvalidRecord rejects the whole record. When only
// the replica_scheduler payload is malformed or inconsistent (with itself
// or with the record's member and outcome), ParseRecord returns the record
// without it together with an error wrapping ErrInvalidScheduler. Errors
// never quote the input.
func ParseRecord(data []byte) (Record, error) {
	if len(data) > MaxLineBytes {
		return Record{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidRecord, MaxLineBytes)
	}
	obj, err := object(data, recordKeys, keyQueue, keyQueuedUS, keyReplicaScheduler)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	r, err := parseLegacy(obj)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	raw, ok := obj[keyReplicaScheduler]
	if !ok {
		return r, nil
	}
	d, err := parseDecision(raw)
	if err == nil {
		r.Scheduler = &d
		if !r.SchedulerValid() {
			r.Scheduler, err = nil, errInconsistent
		}
	}
	if err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalidScheduler, err)
	}
	return r, nil
}

// The fixed reasons of ingestion errors; none quotes the input.
var (
	errNotObject     = errors.New("not a JSON object")
	errUnknownKey    = errors.New("unknown key")
	errDuplicateKey  = errors.New("duplicate key")
	errMissingKey    = errors.New("missing key")
	errWrongType     = errors.New("wrong value type")
	errOutOfRange    = errors.New("value out of range")
	errUnknownEnum   = errors.New("unknown enum value")
	errBadID         = errors.New("malformed id")
	errTooMany       = errors.New("too many items")
	errTrailing      = errors.New("trailing data")
	errInconsistent  = errors.New("inconsistent fields")
	errMalformedJSON = errors.New("malformed JSON")
)

// object decodes one JSON object whose keys must be exactly keys, each at
// most once; the keys named in optional may be absent. It returns the raw
// values by key.
func object(data []byte, keys []string, optional ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	out := make(map[string]json.RawMessage, len(keys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errMalformedJSON
		}
		key, _ := tok.(string)
		if !slices.Contains(keys, key) {
			return nil, errUnknownKey
		}
		if _, dup := out[key]; dup {
			return nil, errDuplicateKey
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errMalformedJSON
		}
		out[key] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errMalformedJSON
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errTrailing
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok && !slices.Contains(optional, k) {
			return nil, errMissingKey
		}
	}
	return out, nil
}

// array decodes a JSON array of at most limit items, stopping at the first
// item past the bound.
func array(raw json.RawMessage, limit int) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, errWrongType
	}
	var out []json.RawMessage
	for dec.More() {
		if len(out) == limit {
			return nil, errTooMany
		}
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			return nil, errMalformedJSON
		}
		out = append(out, item)
	}
	return out, nil
}

// str decodes a JSON string (not null, not any other type).
func str(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", errWrongType
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errWrongType
	}
	return s, nil
}

// integer decodes a JSON integer (no fraction, no exponent) within lo..hi.
func integer(raw json.RawMessage, lo, hi int64) (int64, error) {
	s := string(raw)
	if s == "" || s == "-" {
		return 0, errWrongType
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (i != 0 || c != '-') {
			return 0, errWrongType
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, errOutOfRange
	}
	return v, nil
}

// boolean decodes a JSON boolean.
func boolean(raw json.RawMessage) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errWrongType
}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// fields reads typed values out of one decoded object, keeping the first
// error so that a run of reads is checked once.
type fields struct {
	obj map[string]json.RawMessage
	err error
}

// str reads a string field.
func (f *fields) str(key string) string {
	if f.err != nil {
		return ""
	}
	s, err := str(f.obj[key])
	f.err = err
	return s
}

// int reads an integer field within lo..hi.
func (f *fields) int(key string, lo, hi int64) int64 {
	if f.err != nil {
		return 0
	}
	v, err := integer(f.obj[key], lo, hi)
	f.err = err
	return v
}

// optionalInt reads an integer field within lo..hi that may be null.
func (f *fields) optionalInt(key string, lo, hi int64) (int64, bool) {
	if f.err != nil || isNull(f.obj[key]) {
		return 0, false
	}
	return f.int(key, lo, hi), true
}

// bool reads a boolean field.
func (f *fields) bool(key string) bool {
	if f.err != nil {
		return false
	}
	v, err := boolean(f.obj[key])
	f.err = err
	return v
}

// parseLegacy decodes and checks everything of a record but its scheduler
// payload.
func parseLegacy(obj map[string]json.RawMessage) (Record, error) {
	f := fields{obj: obj}
	r := Record{
		RequestID: f.str("request_id"),
		Duration:  time.Duration(f.int("duration_us", 0, maxDurationUS)) * time.Microsecond,
		Alias:     f.str("alias"),
		Tier:      f.str("tier"),
		Outcome:   Outcome(f.str("outcome")),
		Status:    int(f.int("status", 0, 599)),
	}
	ts, reason := f.str("time"), f.str("refusal_reason")
	if f.err != nil {
		return Record{}, f.err
	}
	if !validRequestID(r.RequestID) || r.Alias != "" && !validAlias(r.Alias) || r.Tier != "" && !validTier(r.Tier) {
		return Record{}, errBadID
	}
	var err error
	if r.Time, err = time.Parse(timeLayout, ts); err != nil {
		return Record{}, errWrongType
	}
	if err := parseQueue(obj, &r); err != nil {
		return Record{}, err
	}
	attempts, err := array(obj["attempts"], 1)
	if err != nil {
		return Record{}, err
	}
	switch r.Outcome {
	case OutcomeRefused:
		if !gateCode(reason) || len(attempts) != 0 || r.Alias != "" || r.Tier != "" || !gateStatus(reason, r.Status) ||
			r.Queue != "" {
			return Record{}, errInconsistent
		}
		r.Code = reason
	case OutcomeNotAdmitted:
		if !notAdmittedConsistent(reason, r.Status, r.Queue) || len(attempts) != 0 || r.Alias == "" || r.Tier == "" {
			return Record{}, errInconsistent
		}
		r.Code = reason
	case OutcomeAdmitted:
		if reason != "" || len(attempts) != 1 || r.Alias == "" || r.Tier == "" || r.Queue != "" && r.Queue != QueueAdmitted {
			return Record{}, errInconsistent
		}
		if err := parseAttempt(attempts[0], &r); err != nil {
			return Record{}, err
		}
	default:
		return Record{}, errUnknownEnum
	}
	return r, nil
}

// parseQueue decodes the optional queue outcome and wait into r: both keys
// or neither, a known outcome, and a wait no longer than the request.
func parseQueue(obj map[string]json.RawMessage, r *Record) error {
	_, hasQueue := obj[keyQueue]
	_, hasQueued := obj[keyQueuedUS]
	switch {
	case !hasQueue && !hasQueued:
		return nil
	case !hasQueue || !hasQueued:
		return errMissingKey
	}
	f := fields{obj: obj}
	r.Queue = QueueOutcome(f.str(keyQueue))
	queuedUS := f.int(keyQueuedUS, 0, maxDurationUS)
	switch {
	case f.err != nil:
		return f.err
	case !r.Queue.valid():
		return errUnknownEnum
	case queuedUS > micros(r.Duration):
		return errInconsistent
	}
	r.Queued = time.Duration(queuedUS) * time.Microsecond
	return nil
}

// parseAttempt decodes the attempt of an admitted record into r.
func parseAttempt(raw json.RawMessage, r *Record) error {
	obj, err := object(raw, attemptKeys, keyEjection, keyProtocol)
	if err != nil {
		return err
	}
	f := fields{obj: obj}
	r.Member = f.str("member_id")
	class := f.str("status_class")
	durUS := f.int("duration_us", 0, maxDurationUS)
	fbUS, hasFirstByte := f.optionalInt("first_byte_us", 0, maxDurationUS)
	r.End = StreamOutcome(f.str("stream_outcome"))
	if _, ok := obj[keyEjection]; ok {
		r.Ejection = Ejection(f.str(keyEjection))
		if f.err == nil && !r.Ejection.valid() {
			return errUnknownEnum
		}
	}
	if _, ok := obj[keyProtocol]; ok {
		r.Protocol = ProtocolError(f.str(keyProtocol))
		if f.err == nil && !r.Protocol.valid() {
			return errUnknownEnum
		}
	}
	switch {
	case f.err != nil:
		return f.err
	case !bounds.ValidMemberID(r.Member):
		return errBadID
	case !r.End.valid():
		return errUnknownEnum
	case (r.Ejection != "" || r.Protocol != "") && (r.End != StreamUpstreamUnavailable || r.Status != 502):
		return errInconsistent
	case r.Ejection != "" && r.Protocol != "":
		return errInconsistent // a member that answered was not ejected.
	case class != StatusClass(r.Status):
		return errInconsistent
	case r.End == StreamMalformed && class != "2xx":
		return errInconsistent // only 2xx event streams have their framing checked.
	case durUS > micros(r.Duration) || fbUS > durUS:
		return errInconsistent
	}
	r.Dispatch = r.Duration - time.Duration(durUS)*time.Microsecond
	if hasFirstByte {
		r.FirstByte = r.Dispatch + time.Duration(fbUS)*time.Microsecond
	}
	switch {
	case r.End == StreamUpstreamUnavailable && r.Status == 502:
		r.Code = CodeUpstreamUnavailable
	case r.End == StreamHeaderTimeout && r.Status == 504:
		r.Code = CodeUpstreamTimeout
	}
	return nil
}

// parseDecision decodes a scheduler payload. Consistency beyond types,
// bounds and enums is left to Record.SchedulerValid.
func parseDecision(raw json.RawMessage) (scheduler.Decision, error) {
	var d scheduler.Decision
	obj, err := object(raw, schedulerKeys)
	if err != nil {
		return d, err
	}
	f := fields{obj: obj}
	d.SelectedMemberID = f.str("selected_member_id")
	d.Reason = scheduler.Reason(f.str("reason"))
	if f.err != nil {
		return d, f.err
	}
	if d.Reason != scheduler.ReasonSelected && d.Reason != scheduler.ReasonNoEligibleMember {
		return d, errUnknownEnum
	}
	ids, err := array(obj["eligible_ids"], bounds.MaxMembers)
	if err != nil {
		return d, err
	}
	rows, err := array(obj["scores"], bounds.MaxMembers)
	if err != nil {
		return d, err
	}
	d.EligibleIDs = make([]string, 0, len(ids))
	for _, raw := range ids {
		id, err := str(raw)
		if err != nil {
			return d, err
		}
		if !bounds.ValidMemberID(id) {
			return d, errBadID
		}
		d.EligibleIDs = append(d.EligibleIDs, id)
	}
	d.Scores = make([]scheduler.Score, 0, len(rows))
	for _, raw := range rows {
		s, err := parseScore(raw)
		if err != nil {
			return d, err
		}
		d.Scores = append(d.Scores, s)
	}
	return d, nil
}

// parseScore decodes one score row. A fresh row must carry a PPM and any
// other row must carry null.
func parseScore(raw json.RawMessage) (scheduler.Score, error) {
	obj, err := object(raw, scoreKeys)
	if err != nil {
		return scheduler.Score{}, err
	}
	f := fields{obj: obj}
	// A name outside the set parses as the zero Freshness, refused below.
	freshness, _ := scheduler.ParseFreshness(f.str("upstream_freshness"))
	s := scheduler.Score{
		MemberID:          f.str("member_id"),
		LocalActive:       int(f.int("local_active", 0, scheduler.MaxActive)),
		LocalCapacity:     int(f.int("local_capacity", bounds.MinConcurrency, bounds.MaxConcurrency)),
		UpstreamFreshness: freshness,
		UpstreamUnknown:   f.bool("upstream_unknown"),
		RotatingRank:      int(f.int("rotating_rank", 0, bounds.MaxMembers-1)),
	}
	ppm, hasPPM := f.optionalInt("upstream_ppm", 0, scheduler.MaxRequestPPM)
	switch {
	case f.err != nil:
		return s, f.err
	case !bounds.ValidMemberID(s.MemberID):
		return s, errBadID
	}
	switch s.UpstreamFreshness {
	case scheduler.FreshnessFresh:
		if !hasPPM {
			return s, errInconsistent // fresh without a PPM.
		}
		s.UpstreamPPM = ppm
	case scheduler.FreshnessStale, scheduler.FreshnessFailed, scheduler.FreshnessUnknown:
		if hasPPM {
			return s, errInconsistent // a PPM on a sample that is not fresh.
		}
	default:
		return s, errUnknownEnum
	}
	return s, nil
}

// validRequestID reports whether id is 1..64 bytes of [A-Za-z0-9._:-], the
// router's grammar of a kept X-Request-Id.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// validAlias reports whether s matches the ReplicaTier alias grammar
// ^[A-Za-z0-9][A-Za-z0-9._:/-]*$ within its length bound.
func validAlias(s string) bool {
	if len(s) == 0 || len(s) > maxAliasLength || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !alnum(c) && c != '.' && c != '_' && c != ':' && c != '/' && c != '-' {
			return false
		}
	}
	return true
}

// validTier reports whether s is namespace/name: two lowercase DNS names.
func validTier(s string) bool {
	ns, name, ok := bytes.Cut([]byte(s), []byte("/"))
	if !ok || len(s) > maxTierLength {
		return false
	}
	return dnsName(ns) && dnsName(name)
}

// dnsName reports whether s is a non-empty run of [a-z0-9.-] starting and
// ending with a letter or digit.
func dnsName(s []byte) bool {
	if len(s) == 0 || len(s) > maxDNSNameLength || s[0] == '-' || s[0] == '.' || s[len(s)-1] == '-' || s[len(s)-1] == '.' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

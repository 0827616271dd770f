package evidence

import (
	"encoding/json"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// timeLayout is the format of a record's "time": RFC 3339 in UTC with
// nanoseconds, trailing zeros trimmed.
const timeLayout = time.RFC3339Nano

// The optional attempt keys: ejection only when the exchange ejected its
// member, protocol_error only when the member broke the protocol. The
// optional record keys: queue and queued_us, together, only when the
// request met its tier's admission queue; replica_scheduler only with a
// valid scheduler payload.
const (
	keyEjection         = "ejection"
	keyProtocol         = "protocol_error"
	keyQueue            = "queue"
	keyQueuedUS         = "queued_us"
	keyReplicaScheduler = "replica_scheduler"
)

// The JSON keys of a record, of an attempt, of the scheduler payload and of
// one score row: the allowlist. Serialization writes exactly these keys and
// ingestion accepts exactly these keys.
var (
	recordKeys    = []string{"request_id", "time", "duration_us", "alias", "tier", "outcome", "status", "refusal_reason", "queue", "queued_us", "attempts", "replica_scheduler"}
	attemptKeys   = []string{"member_id", "status_class", "duration_us", "first_byte_us", "stream_outcome", "ejection", "protocol_error"}
	schedulerKeys = []string{"selected_member_id", "reason", "eligible_ids", "scores"}
	scoreKeys     = []string{"member_id", "local_active", "local_capacity", "upstream_freshness", "upstream_ppm", "upstream_unknown", "rotating_rank"}
)

// recordJSON is the wire shape of a Record. Its fields are the allowlist in
// recordKeys, in that order.
type recordJSON struct {
	RequestID     string         `json:"request_id"`
	Time          string         `json:"time"`
	DurationUS    int64          `json:"duration_us"`
	Alias         string         `json:"alias"`
	Tier          string         `json:"tier"`
	Outcome       Outcome        `json:"outcome"`
	Status        int            `json:"status"`
	RefusalReason string         `json:"refusal_reason"`
	Queue         QueueOutcome   `json:"queue,omitempty"`
	QueuedUS      *int64         `json:"queued_us,omitempty"`
	Attempts      []attemptJSON  `json:"attempts"`
	Scheduler     *schedulerJSON `json:"replica_scheduler,omitempty"`
}

// attemptJSON is the wire shape of the one attempt of an admitted record.
type attemptJSON struct {
	MemberID      string        `json:"member_id"`
	StatusClass   string        `json:"status_class"`
	DurationUS    int64         `json:"duration_us"`
	FirstByteUS   *int64        `json:"first_byte_us"`
	StreamOutcome StreamOutcome `json:"stream_outcome"`
	Ejection      Ejection      `json:"ejection,omitempty"`
	Protocol      ProtocolError `json:"protocol_error,omitempty"`
}

// schedulerJSON is the wire shape of the scheduler payload: the four fields
// of scheduler.Decision, copied one by one.
type schedulerJSON struct {
	SelectedMemberID string      `json:"selected_member_id"`
	Reason           string      `json:"reason"`
	EligibleIDs      []string    `json:"eligible_ids"`
	Scores           []scoreJSON `json:"scores"`
}

// scoreJSON is the wire shape of one score row: the seven fields of
// scheduler.Score, copied one by one, with the PPM null unless fresh.
type scoreJSON struct {
	MemberID          string `json:"member_id"`
	LocalActive       int    `json:"local_active"`
	LocalCapacity     int    `json:"local_capacity"`
	UpstreamFreshness string `json:"upstream_freshness"`
	UpstreamPPM       *int64 `json:"upstream_ppm"`
	UpstreamUnknown   bool   `json:"upstream_unknown"`
	RotatingRank      int    `json:"rotating_rank"`
}

// micros converts a duration to whole microseconds, never negative.
func micros(d time.Duration) int64 {
	return max(d.Microseconds(), 0)
}

// wire projects r onto its wire shape, dropping an invalid scheduler
// payload.
func (r *Record) wire() recordJSON {
	w := recordJSON{
		RequestID:  r.RequestID,
		Time:       r.Time.UTC().Format(timeLayout),
		DurationUS: micros(r.Duration),
		Alias:      r.Alias,
		Tier:       r.Tier,
		Outcome:    r.Outcome,
		Status:     r.Status,
		Attempts:   []attemptJSON{},
	}
	if r.Queue.valid() {
		us := micros(r.Queued)
		w.Queue, w.QueuedUS = r.Queue, &us
	}
	if r.Outcome != OutcomeAdmitted {
		w.RefusalReason = r.Code
		return w
	}
	a := attemptJSON{
		MemberID:      r.Member,
		StatusClass:   StatusClass(r.Status),
		DurationUS:    micros(r.attemptDuration()),
		StreamOutcome: r.End,
		Ejection:      r.Ejection,
		Protocol:      r.Protocol,
	}
	if fb, ok := r.attemptFirstByte(); ok {
		us := micros(fb)
		a.FirstByteUS = &us
	}
	w.Attempts = append(w.Attempts, a)
	if r.SchedulerValid() {
		w.Scheduler = schedulerWire(r.Scheduler)
	}
	return w
}

// schedulerWire copies the allowlisted fields of a decision.
func schedulerWire(d *scheduler.Decision) *schedulerJSON {
	s := &schedulerJSON{
		SelectedMemberID: d.SelectedMemberID,
		Reason:           string(d.Reason),
		EligibleIDs:      append(make([]string, 0, len(d.EligibleIDs)), d.EligibleIDs...),
		Scores:           make([]scoreJSON, 0, len(d.Scores)),
	}
	for _, sc := range d.Scores {
		row := scoreJSON{
			MemberID:          sc.MemberID,
			LocalActive:       sc.LocalActive,
			LocalCapacity:     sc.LocalCapacity,
			UpstreamFreshness: sc.UpstreamFreshness.String(),
			UpstreamUnknown:   sc.UpstreamUnknown,
			RotatingRank:      sc.RotatingRank,
		}
		if sc.UpstreamFreshness == scheduler.FreshnessFresh {
			ppm := sc.UpstreamPPM
			row.UpstreamPPM = &ppm
		}
		s.Scores = append(s.Scores, row)
	}
	return s
}

// MarshalJSON encodes the record through the allowlist: the record keys
// ("queue" and "queued_us" only when the request met its tier's admission
// queue), "attempts" (one entry for an admitted record, none otherwise) and, only
// when SchedulerValid, "replica_scheduler" with the four decision fields
// and the seven fields of each score row. An invalid payload is left out.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(r.wire())
}

// AppendJSON appends the record's JSON encoding and a newline: one JSONL
// line.
func (r *Record) AppendJSON(dst []byte) ([]byte, error) {
	b, err := json.Marshal(r.wire())
	if err != nil {
		return dst, err
	}
	return append(append(dst, b...), '\n'), nil
}

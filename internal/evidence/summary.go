package evidence

import (
	"bufio"
	"errors"
	"io"
)

// Summary counts decision records. Every key is an id or an enum value
// taken from records that passed their checks.
type Summary struct {
	// Records is the number of records counted.
	Records int `json:"records"`
	// Outcomes counts records per outcome.
	Outcomes map[string]int `json:"outcomes"`
	// Tiers counts records per tier; records refused before alias
	// resolution have no tier and are not counted here.
	Tiers map[string]int `json:"tiers"`
	// Members counts admitted records per tier and member.
	Members map[string]map[string]int `json:"members"`
	// StreamOutcomes counts admitted records per stream outcome (complete,
	// truncated, malformed, upstream_error, ...).
	StreamOutcomes map[string]int `json:"stream_outcomes"`
	// RefusalReasons counts refused and not-admitted records per reason.
	RefusalReasons map[string]int `json:"refusal_reasons"`
	// WinnerFreshness counts records with a valid scheduler payload per
	// freshness class of the selected member's pressure at selection.
	WinnerFreshness map[string]int `json:"winner_freshness"`
	// InvalidRecords counts captured lines rejected whole (SummarizeJSONL
	// only).
	InvalidRecords int `json:"invalid_records"`
	// InvalidScheduler counts records whose scheduler payload was dropped
	// as invalid; the rest of each such record is counted.
	InvalidScheduler int `json:"invalid_scheduler"`
}

// summarizer accumulates a Summary: records per outcome, tier, member,
// refusal reason and freshness class of the winner. A scheduler payload
// failing Record.SchedulerValid is not counted as evidence but as
// InvalidScheduler, as on every other surface.
type summarizer struct {
	s Summary
}

// add counts one record, ignoring (and counting) an invalid scheduler
// payload.
func (z *summarizer) add(r *Record) {
	z.init()
	s := &z.s
	s.Records++
	s.Outcomes[string(r.Outcome)]++
	if r.Tier != "" {
		s.Tiers[r.Tier]++
	}
	if r.Outcome != OutcomeAdmitted {
		s.RefusalReasons[r.Code]++
		return
	}
	members := s.Members[r.Tier]
	if members == nil {
		members = map[string]int{}
		s.Members[r.Tier] = members
	}
	members[r.Member]++
	s.StreamOutcomes[string(r.End)]++
	switch {
	case r.SchedulerValid():
		s.WinnerFreshness[r.Scheduler.Scores[0].UpstreamFreshness.String()]++
	case r.Scheduler != nil:
		s.InvalidScheduler++
	}
}

// init makes the maps, once.
func (z *summarizer) init() {
	if z.s.Outcomes != nil {
		return
	}
	s := &z.s
	s.Outcomes, s.Tiers, s.RefusalReasons, s.WinnerFreshness = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	s.StreamOutcomes = map[string]int{}
	s.Members = map[string]map[string]int{}
}

// summary returns the accumulated Summary, with empty maps rather than nil
// ones.
func (z *summarizer) summary() Summary {
	z.init()
	return z.s
}

// SummarizeJSONL counts the records of a captured JSONL stream, such as a
// FileSink file. Every line goes through ParseRecord: a line it rejects
// whole (or longer than MaxLineBytes) counts as InvalidRecords, a record
// whose scheduler payload it drops counts as InvalidScheduler and is
// otherwise summarized. Empty lines are skipped. The error is only a read
// error of r.
func SummarizeJSONL(r io.Reader) (Summary, error) {
	var z summarizer
	br := bufio.NewReaderSize(r, MaxLineBytes+1)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			z.s.InvalidRecords++
			if err := skipLine(br); err != nil {
				return z.summary(), readError(err)
			}
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return z.summary(), err
		}
		if body := trimNewline(line); len(body) > 0 {
			rec, perr := ParseRecord(body)
			switch {
			case errors.Is(perr, ErrInvalidRecord):
				z.s.InvalidRecords++
			case errors.Is(perr, ErrInvalidScheduler):
				z.s.InvalidScheduler++
				z.add(&rec)
			default:
				z.add(&rec)
			}
		}
		if err != nil { // io.EOF
			return z.summary(), nil
		}
	}
}

// skipLine discards the rest of an overlong line.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// readError maps the end of the stream to no error.
func readError(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// trimNewline removes a trailing "\n" or "\r\n".
func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

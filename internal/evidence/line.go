package evidence

import (
	"log/slog"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// The keys of the one-line format, in order. The first nine are the
// router's access line as it was before scheduler evidence existed; the
// three scheduler keys are appended only for a valid scheduler payload,
// then ejection, only when the exchange ejected its member,
// protocol_error, only when the member broke the protocol, and queue and
// queued, only when the request met its tier's admission queue.
const (
	keyRequestID      = "request_id"
	keyTier           = "tier"
	keyMember         = "member"
	keyResult         = "result"
	keyCode           = "code"
	keyStatus         = "status"
	keyEnd            = "end"
	keyDuration       = "duration"
	keyFirstByte      = "first_byte"
	keyScheduler      = "replica_scheduler"
	keySchedulerWhy   = "replica_scheduler_reason"
	keyEligibleCount  = "replica_eligible_count"
	keyLineEjection   = "ejection"
	keyLineProtocol   = "protocol_error"
	keyLineQueue      = "queue"
	keyLineQueued     = "queued"
	schedulerCapacity = "capacity"
)

// LineAttrs is the number of attributes AppendAttrs appends at most: the
// nine of the access line, three scheduler keys, ejection, protocol_error,
// queue and queued.
const LineAttrs = 16

// AppendAttrs appends the record's one-line attributes, for a log/slog
// access line: request_id, tier, member, result, code, status, end,
// duration and first_byte — the router's access line, unchanged — and,
// only when SchedulerValid, replica_scheduler=capacity,
// replica_scheduler_reason=selected and replica_eligible_count=N, only
// when the exchange ejected its member, ejection=REASON, only when the
// member broke the protocol, protocol_error=REASON, and only when the
// request met its tier's admission queue, queue=OUTCOME and queued=WAIT. A
// slog.TextHandler renders them exactly as AppendLine writes them.
func (r *Record) AppendAttrs(dst []slog.Attr) []slog.Attr {
	dst = append(dst,
		slog.String(keyRequestID, r.RequestID),
		slog.String(keyTier, r.Tier),
		slog.String(keyMember, r.Member),
		slog.String(keyResult, string(r.Outcome)),
		slog.String(keyCode, r.Code),
		slog.Int(keyStatus, r.Status),
		slog.String(keyEnd, string(r.End)),
		slog.Duration(keyDuration, r.Duration),
		slog.Duration(keyFirstByte, r.FirstByte),
	)
	if r.SchedulerValid() {
		dst = append(dst,
			slog.String(keyScheduler, schedulerCapacity),
			slog.String(keySchedulerWhy, string(r.Scheduler.Reason)),
			slog.Int(keyEligibleCount, len(r.Scheduler.EligibleIDs)),
		)
	}
	if r.Ejection != "" {
		dst = append(dst, slog.String(keyLineEjection, string(r.Ejection)))
	}
	if r.Protocol != "" {
		dst = append(dst, slog.String(keyLineProtocol, string(r.Protocol)))
	}
	if r.Queue.valid() {
		dst = append(dst, slog.String(keyLineQueue, string(r.Queue)), slog.Duration(keyLineQueued, r.Queued))
	}
	return dst
}

// AppendLine appends the record's one-line text form: the attributes of
// AppendAttrs as space-separated key=value pairs, values quoted exactly
// when log/slog's TextHandler quotes them, without a newline. For a record
// without a valid scheduler payload or an ejection the line is
// byte-identical to the router's access line; a valid payload appends only
// " replica_scheduler=capacity replica_scheduler_reason=selected
// replica_eligible_count=N", an ejection only " ejection=REASON", a
// protocol error only " protocol_error=REASON", a queue outcome only
// " queue=OUTCOME queued=WAIT". Score rows never appear in the line, so a
// tier without a queue logs the lines it logged before queues existed.
func (r *Record) AppendLine(dst []byte) []byte {
	dst = appendString(dst, keyRequestID, r.RequestID)
	dst = appendString(append(dst, ' '), keyTier, r.Tier)
	dst = appendString(append(dst, ' '), keyMember, r.Member)
	dst = appendString(append(dst, ' '), keyResult, string(r.Outcome))
	dst = appendString(append(dst, ' '), keyCode, r.Code)
	dst = appendInt(append(dst, ' '), keyStatus, r.Status)
	dst = appendString(append(dst, ' '), keyEnd, string(r.End))
	dst = appendDuration(append(dst, ' '), keyDuration, r.Duration)
	dst = appendDuration(append(dst, ' '), keyFirstByte, r.FirstByte)
	if r.SchedulerValid() {
		dst = appendString(append(dst, ' '), keyScheduler, schedulerCapacity)
		dst = appendString(append(dst, ' '), keySchedulerWhy, string(r.Scheduler.Reason))
		dst = appendInt(append(dst, ' '), keyEligibleCount, len(r.Scheduler.EligibleIDs))
	}
	if r.Ejection != "" {
		dst = appendString(append(dst, ' '), keyLineEjection, string(r.Ejection))
	}
	if r.Protocol != "" {
		dst = appendString(append(dst, ' '), keyLineProtocol, string(r.Protocol))
	}
	if r.Queue.valid() {
		dst = appendString(append(dst, ' '), keyLineQueue, string(r.Queue))
		dst = appendDuration(append(dst, ' '), keyLineQueued, r.Queued)
	}
	return dst
}

// String returns the record's one-line text form (AppendLine).
func (r Record) String() string {
	return string(r.AppendLine(make([]byte, 0, 256)))
}

func appendString(dst []byte, key, value string) []byte {
	dst = append(append(dst, key...), '=')
	if needsQuoting(value) {
		return strconv.AppendQuote(dst, value)
	}
	return append(dst, value...)
}

func appendInt(dst []byte, key string, value int) []byte {
	return strconv.AppendInt(append(append(dst, key...), '='), int64(value), 10)
}

func appendDuration(dst []byte, key string, value time.Duration) []byte {
	return append(append(append(dst, key...), '='), value.String()...)
}

// needsQuoting reports whether log/slog's TextHandler quotes s: when it is
// empty, or holds a space, '=', '"', an ASCII control character, or a rune
// that is invalid, a space or not printable.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b == ' ' || b == '=' || b == '"' || b < 0x20 {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

package evidence

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestEjection checks the attempt's ejection: written to JSON and the line
// only when set, read back by ParseRecord, and refused on ingestion when it
// is outside its closed set or on an attempt that did not fail before
// response headers.
func TestEjection(t *testing.T) {
	ejected := roundRobinRecord() // upstream_unavailable, 502.
	ejected.Ejection = EjectionRefused
	line, err := ejected.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"stream_outcome":"upstream_unavailable","ejection":"connection_refused"}`)) {
		t.Fatalf("JSON %s lacks the attempt's ejection", line)
	}
	back, err := ParseRecord(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || back.Ejection != EjectionRefused {
		t.Fatalf("ParseRecord = %+v, %v; want the ejection back", back, err)
	}
	if want := legacyLine(t, roundRobinRecord()) + " ejection=connection_refused"; ejected.String() != want {
		t.Fatalf("line\n got %s\nwant %s", ejected.String(), want)
	}
	if got, want := ejected.String(), textLine(t, ejected.AppendAttrs(nil)...); got != want {
		t.Fatalf("line %s, TextHandler %s", got, want)
	}
	rr := roundRobinRecord()
	plain, _ := rr.AppendJSON(nil)
	if bytes.Contains(plain, []byte("ejection")) || strings.Contains(rr.String(), "ejection") {
		t.Fatalf("a record without an ejection mentions one: %s", plain)
	}

	for desc, edit := range map[string]func(s string) string{
		"unknown reason": func(s string) string {
			return strings.Replace(s, `"connection_refused"`, `"flaky"`, 1)
		},
		"wrong type": func(s string) string {
			return strings.Replace(s, `"connection_refused"`, `true`, 1)
		},
		"on a complete attempt": func(s string) string {
			s = strings.Replace(s, `"upstream_unavailable"`, `"complete"`, 1)
			return strings.Replace(s, `"status":502`, `"status":200`, 1)
		},
		"duplicate key": func(s string) string {
			return strings.Replace(s, `"ejection":"connection_refused"`, `"ejection":"connection_refused","ejection":"connection_reset"`, 1)
		},
	} {
		bad := edit(strings.TrimSuffix(string(line), "\n"))
		if _, err := ParseRecord([]byte(bad)); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: ParseRecord(%s) = %v, want ErrInvalidRecord", desc, bad, err)
		}
	}
}

// TestProtocolError checks the attempt's protocol_error as TestEjection
// checks the ejection, and that one attempt never carries both: a member
// that answered, however badly, was not ejected.
func TestProtocolError(t *testing.T) {
	broken := roundRobinRecord() // upstream_unavailable, 502.
	broken.Protocol = ProtocolHeadTooLarge
	line, err := broken.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"stream_outcome":"upstream_unavailable","protocol_error":"response_head_too_large"}`)) {
		t.Fatalf("JSON %s lacks the attempt's protocol error", line)
	}
	back, err := ParseRecord(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || back.Protocol != ProtocolHeadTooLarge {
		t.Fatalf("ParseRecord = %+v, %v; want the protocol error back", back, err)
	}
	if want := legacyLine(t, roundRobinRecord()) + " protocol_error=response_head_too_large"; broken.String() != want {
		t.Fatalf("line\n got %s\nwant %s", broken.String(), want)
	}
	if got, want := broken.String(), textLine(t, broken.AppendAttrs(nil)...); got != want {
		t.Fatalf("line %s, TextHandler %s", got, want)
	}
	for desc, edit := range map[string]func(s string) string{
		"unknown reason": func(s string) string {
			return strings.Replace(s, `"response_head_too_large"`, `"rude"`, 1)
		},
		"on a complete attempt": func(s string) string {
			s = strings.Replace(s, `"upstream_unavailable"`, `"complete"`, 1)
			return strings.Replace(s, `"status":502`, `"status":200`, 1)
		},
		"with an ejection": func(s string) string {
			return strings.Replace(s, `"protocol_error"`, `"ejection":"connection_reset","protocol_error"`, 1)
		},
	} {
		bad := edit(strings.TrimSuffix(string(line), "\n"))
		if _, err := ParseRecord([]byte(bad)); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: ParseRecord(%s) = %v, want ErrInvalidRecord", desc, bad, err)
		}
	}
}

package apierrortest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Code decodes an OpenAI error body and returns its code. It fails the test
// when the body is anything else: not JSON, a member other than the error
// object, or an error object without its message, type or code.
func Code(t testing.TB, body []byte) string {
	t.Helper()
	var e struct {
		Error *struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil || e.Error.Message == nil || e.Error.Type == nil || e.Error.Code == nil {
		t.Fatalf("body %q is not an OpenAI error object (%v)", body, err)
	}
	return *e.Error.Code
}

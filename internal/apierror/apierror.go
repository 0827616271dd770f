// Package apierror is the error object sluice's HTTP servers answer with,
// in the OpenAI shape {"error":{"message","type","code"}}, encoded once and
// written with the headers the front door and the admin API share.
package apierror

import (
	"encoding/json"
	"net/http"
)

// The error types of the OpenAI error object.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeServer         = "server_error"
)

// Error is one error a server produces. Its message is fixed text: it
// never quotes the request, a member or an error.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the object's code, as documented (docs/ROUTER.md#4-errors).
	Code string
	body []byte // the encoded error object, computed once.
	// closes says the response ends the client's connection
	// (closesConnection).
	closes bool
}

// New encodes an Error once, at package initialization of its user.
func New(status int, typ, code, message string) *Error {
	var obj struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	obj.Error.Message, obj.Error.Type, obj.Error.Code = message, typ, code
	body, err := json.Marshal(obj)
	if err != nil {
		panic(err) // unreachable: three strings always encode.
	}
	return &Error{Status: status, Code: code, body: append(body, '\n'), closes: closesConnection(status)}
}

// closesConnection reports whether an error of status ends the client's
// connection ("Connection: close"): 401, 404, 405 and 413 answer a client
// that has no key, asks for what is not there, or sent a body that was not
// read. A client that has not proven a key, or that probes routes, gets no
// keep-alive connection to hold (docs/CONFIGURATION.md#11-connection-limits);
// a 413's unread body would otherwise be parsed as the next request.
func closesConnection(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// retryAfter is the Retry-After value of every 503 and 429: admission
// refusals are momentary, and one second matches the pressure refresh
// period.
var retryAfter = []string{"1"}

// connectionClose is the Connection header of a response that ends the
// client's connection; shared, never appended to.
var connectionClose = []string{"close"}

// Write sends e. Headers already set on w (request id, tier, member) stay.
func (e *Error) Write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		h["Retry-After"] = retryAfter
	}
	if e.closes {
		h["Connection"] = connectionClose
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.body)
}

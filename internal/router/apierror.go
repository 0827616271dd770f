package router

import (
	"encoding/json"
	"net/http"
)

// apiError is one error the router itself produces, in the OpenAI error
// shape {"error":{"message","type","code"}}. The message is fixed text: it
// never quotes the request, the member or an error.
type apiError struct {
	status int
	code   string
	body   []byte // the encoded error object, computed once.
	// closes says the response ends the client's connection (closesConnection).
	closes bool
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

// The error types of the OpenAI error object the router uses.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeServer         = "server_error"
)

// newAPIError encodes an apiError once, at package initialization.
func newAPIError(status int, typ, code, message string) *apiError {
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
	return &apiError{status: status, code: code, body: append(body, '\n'), closes: closesConnection(status)}
}

// The errors of the front door. Their codes are part of the documented API
// (docs/ROUTER.md).
var (
	errBadRequest = newAPIError(http.StatusBadRequest, typeInvalidRequest, "invalid_request_body",
		`The request body must be a JSON object with a string "model" field.`)
	errUnauthorized = newAPIError(http.StatusUnauthorized, typeAuthentication, "invalid_api_key",
		"Missing or invalid API key.")
	errModelNotFound = newAPIError(http.StatusNotFound, typeInvalidRequest, "model_not_found",
		"The model does not exist on this router.")
	errRouteNotFound = newAPIError(http.StatusNotFound, typeInvalidRequest, "not_found",
		"Unknown route.")
	errMethodNotAllowed = newAPIError(http.StatusMethodNotAllowed, typeInvalidRequest, "method_not_allowed",
		"Method not allowed on this route.")
	errTooLarge = newAPIError(http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large",
		"The request body exceeds the router's size limit.")
	errBodyBufferExhausted = newAPIError(http.StatusServiceUnavailable, typeServer, "body_buffer_exhausted",
		"The router holds too many request bodies at the moment; retry later.")
	errCapacityExhausted = newAPIError(http.StatusServiceUnavailable, typeServer, "capacity_exhausted",
		"Every eligible replica of the model is at its concurrency limit; retry later.")
	errTierQuiesced = newAPIError(http.StatusServiceUnavailable, typeServer, "tier_quiesced",
		"The model is quiesced for maintenance; retry later.")
	errNoEligibleMember = newAPIError(http.StatusServiceUnavailable, typeServer, "no_eligible_member",
		"No replica of the model is ready and admitting; retry later.")
	errQueueFull = newAPIError(http.StatusTooManyRequests, typeServer, "queue_full",
		"Every replica of the model is busy and its admission queue is full; retry later.")
	errQueueTimeout = newAPIError(http.StatusServiceUnavailable, typeServer, "queue_timeout",
		"No replica of the model became free within the longest queue wait; retry later.")
	errQueueHandedOver = newAPIError(http.StatusServiceUnavailable, typeServer, "router_handed_over",
		"The router handed the model over to its successor while the request waited; retry now.")
	errUpstreamUnavailable = newAPIError(http.StatusBadGateway, typeServer, "upstream_unavailable",
		"The model server failed before sending a response.")
	errUpstreamTimeout = newAPIError(http.StatusGatewayTimeout, typeServer, "upstream_timeout",
		"The model server did not send a response in time.")
)

// retryAfter is the Retry-After value of every 503 and 429: admission
// refusals are momentary, and one second matches the pressure refresh
// period.
var retryAfter = []string{"1"}

// connectionClose is the Connection header of a response that ends the
// client's connection; shared, never appended to.
var connectionClose = []string{"close"}

// write sends e. Headers already set on w (request id, tier, member) stay.
func (e *apiError) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.status == http.StatusServiceUnavailable || e.status == http.StatusTooManyRequests {
		h["Retry-After"] = retryAfter
	}
	if e.closes {
		h["Connection"] = connectionClose
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

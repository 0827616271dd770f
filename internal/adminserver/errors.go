package adminserver

import (
	"encoding/json"
	"net/http"
)

// adminError is one error the admin API produces, in the OpenAI error shape
// the front door uses too, {"error":{"message","type","code"}}. The message
// is fixed text: it never quotes the request, a member or an error.
type adminError struct {
	status int
	body   []byte // the encoded error object, computed once.
	// closes says the response ends the client's connection: a 401 or
	// 404, as on the front door (docs/CONFIGURATION.md#11-connection-limits).
	closes bool
}

// The error types of the OpenAI error object the admin API uses.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeServer         = "server_error"
)

// newAdminError encodes an adminError once, at package initialization.
func newAdminError(status int, typ, code, message string) *adminError {
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
	closes := status == http.StatusUnauthorized || status == http.StatusNotFound
	return &adminError{status: status, body: append(body, '\n'), closes: closes}
}

// The errors of the admin API. Their codes are part of the documented API
// (docs/ROUTER.md).
var (
	errAdminUnauthorized = newAdminError(http.StatusUnauthorized, typeAuthentication, "invalid_admin_token",
		"Missing or invalid admin token.")
	errTierNotFound = newAdminError(http.StatusNotFound, typeInvalidRequest, "tier_not_found",
		"No such tier on this router.")
	errMemberNotFound = newAdminError(http.StatusNotFound, typeInvalidRequest, "member_not_found",
		"No such member in the tier.")
	errDirectTierMember = newAdminError(http.StatusConflict, typeInvalidRequest, "direct_tier",
		"A direct tier (one member) has no member scope; drain the tier.")
	errNotQuiesced = newAdminError(http.StatusConflict, typeInvalidRequest, "not_quiesced",
		"The scope is not quiesced; quiesce it in the ReplicaTier first.")
	errDrainTimeout = newAdminError(http.StatusGatewayTimeout, typeServer, "drain_timeout",
		"The scope still holds requests at the end of the timeout.")
	errBadTimeout = newAdminError(http.StatusBadRequest, typeInvalidRequest, "invalid_timeout",
		"timeout must be a positive Go duration of at most 10m.")
)

// connectionClose is the Connection header of a response that ends the
// client's connection; shared, never appended to.
var connectionClose = []string{"close"}

// write sends e.
func (e *adminError) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.closes {
		h["Connection"] = connectionClose
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

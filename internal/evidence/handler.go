package evidence

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Bounds of GET /admin/v1/decisions.
const (
	// DefaultListLimit is how many records the list returns without limit.
	DefaultListLimit = 100
	// MaxListLimit bounds one list response: the default ring, about 1 MiB
	// of JSON. Larger rings are read through their JSONL file.
	MaxListLimit = DefaultLogSize
)

// The admin routes, in http.ServeMux pattern syntax. The summary route's
// literal segment takes precedence over the request id wildcard.
const (
	routeList    = "GET /admin/v1/decisions"
	routeSummary = "GET /admin/v1/decisions/summary"
	routeRecord  = "GET /admin/v1/decisions/{requestID}"
)

// ListView is the body of GET /admin/v1/decisions.
type ListView struct {
	// Decisions are the latest records, newest first.
	Decisions []Record `json:"decisions"`
}

// RegisterRoutes registers the decision endpoints with handle, which is
// the admin listener's authenticated registration (adminserver.Admin.Handle):
//
//   - GET /admin/v1/decisions?limit=N: the latest N records (default
//     DefaultListLimit, 1..MaxListLimit), newest first;
//   - GET /admin/v1/decisions/{requestID}: the newest record with that
//     request id, or 404 decision_not_found;
//   - GET /admin/v1/decisions/summary: the Summary of the records held.
func (l *Log) RegisterRoutes(handle func(pattern string, h http.Handler)) {
	handle(routeList, http.HandlerFunc(l.serveList))
	handle(routeSummary, http.HandlerFunc(l.serveSummary))
	handle(routeRecord, http.HandlerFunc(l.serveRecord))
}

func (l *Log) serveList(w http.ResponseWriter, r *http.Request) {
	limit := DefaultListLimit
	if s := r.URL.Query().Get("limit"); s != "" || r.URL.Query().Has("limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxListLimit {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_limit",
				"limit must be an integer within 1.."+strconv.Itoa(MaxListLimit)+".")
			return
		}
		limit = n
	}
	writeJSON(w, ListView{Decisions: l.Latest(limit)})
}

func (l *Log) serveRecord(w http.ResponseWriter, r *http.Request) {
	rec, ok := l.Find(r.PathValue("requestID"))
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "decision_not_found",
			"No decision record with that request id is held.")
		return
	}
	writeJSON(w, rec)
}

func (l *Log) serveSummary(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, l.Summary())
}

// writeJSON encodes v as a 200 response, indented like the router's admin
// API.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError answers with the OpenAI error object the router's admin API
// uses. The message is fixed text; it never quotes the request.
func writeError(w http.ResponseWriter, status int, typ, code, message string) {
	var obj struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	obj.Error.Message, obj.Error.Type, obj.Error.Code = message, typ, code
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(obj)
}

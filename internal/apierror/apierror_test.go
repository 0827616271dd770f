package apierror

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWrite: the body is the encoded OpenAI error object; 503 and 429 carry
// Retry-After; 401, 404, 405 and 413 close the connection; headers already
// set on the response stay.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		status            int
		retryAfter, close bool
	}{
		{http.StatusServiceUnavailable, true, false},
		{http.StatusTooManyRequests, true, false},
		{http.StatusUnauthorized, false, true},
		{http.StatusNotFound, false, true},
		{http.StatusMethodNotAllowed, false, true},
		{http.StatusRequestEntityTooLarge, false, true},
		{http.StatusBadGateway, false, false},
		{http.StatusConflict, false, false},
	} {
		e := New(tc.status, TypeServer, "some_code", `A "fixed" message.`)
		w := httptest.NewRecorder()
		w.Header().Set("X-Request-Id", "r1")
		e.Write(w)
		want := `{"error":{"message":"A \"fixed\" message.","type":"server_error","code":"some_code"}}` + "\n"
		h := w.Header()
		switch {
		case w.Code != tc.status || w.Body.String() != want || e.Status != tc.status || e.Code != "some_code":
			t.Errorf("%d: wrote %d %q", tc.status, w.Code, w.Body.String())
		case h.Get("Content-Type") != "application/json" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Request-Id") != "r1":
			t.Errorf("%d: headers %v", tc.status, h)
		case (h.Get("Retry-After") == "1") != tc.retryAfter || (h.Get("Connection") == "close") != tc.close:
			t.Errorf("%d: Retry-After %q, Connection %q", tc.status, h.Get("Retry-After"), h.Get("Connection"))
		}
	}
}

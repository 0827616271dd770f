package evidence

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// serve registers the routes on a mux and serves one GET.
func serve(t *testing.T, l *Log, path string) (int, []byte) {
	t.Helper()
	mux := http.NewServeMux()
	l.RegisterRoutes(mux.Handle)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, body
}

func TestAdminRoutes(t *testing.T) {
	l := newTestLog(t, 16, nil)
	l.Add(refusedRecord())
	l.Add(capacityRecord(t))
	l.Add(notAdmittedRecord())

	status, body := serve(t, l, "/admin/v1/decisions")
	var list struct {
		Decisions []json.RawMessage `json:"decisions"`
	}
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil || len(list.Decisions) != 3 {
		t.Fatalf("list: %d %s", status, body)
	}
	if r, err := ParseRecord(list.Decisions[1]); err != nil || !sameRecord(r, capacityRecord(t)) {
		t.Fatalf("listed record %+v, %v", r, err)
	}
	if _, body := serve(t, l, "/admin/v1/decisions?limit=1"); json.Unmarshal(body, &list) != nil || len(list.Decisions) != 1 {
		t.Fatalf("limit=1: %s", body)
	}
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=x", "?limit=", "?limit=4097"} {
		if status, body := serve(t, l, "/admin/v1/decisions"+q); status != http.StatusBadRequest || !json.Valid(body) {
			t.Errorf("%s: %d %s", q, status, body)
		}
	}

	status, body = serve(t, l, "/admin/v1/decisions/req-capacity-1")
	if r, err := ParseRecord(body); status != http.StatusOK || err != nil || r.Scheduler == nil {
		t.Fatalf("record: %d %s %v", status, body, err)
	}
	if status, body := serve(t, l, "/admin/v1/decisions/nope"); status != http.StatusNotFound || !json.Valid(body) {
		t.Fatalf("missing record: %d %s", status, body)
	}

	status, body = serve(t, l, "/admin/v1/decisions/summary")
	var s Summary
	if err := json.Unmarshal(body, &s); status != http.StatusOK || err != nil || s.Records != 3 || s.WinnerFreshness["stale"] != 1 {
		t.Fatalf("summary: %d %s", status, body)
	}
}

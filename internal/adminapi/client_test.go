package adminapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGetJSONAndPost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /capacity":
			_, _ = w.Write([]byte(`{"tiers":[{"tier":"ns/a","active":2}]}`))
		case "GET /long":
			_, _ = w.Write([]byte(`{"tiers":[{"tier":"` + strings.Repeat("a", 100) + `"}]}`))
		case "POST /reset":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, strings.Repeat("x", 500), http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := srv.Client()
	ctx := t.Context()

	var v CapacityView
	if err := GetJSON(ctx, c, srv.URL+"/capacity", 1<<10, &v); err != nil || len(v.Tiers) != 1 || v.Tiers[0].Active != 2 {
		t.Fatalf("GetJSON = %v, %+v", err, v)
	}
	if err := GetJSON(ctx, c, srv.URL+"/long", 64, &v); err == nil {
		t.Fatal("a body cut at the limit decoded")
	}
	err := GetJSON(ctx, c, srv.URL+"/missing", 1<<10, &v)
	if err == nil || !strings.Contains(err.Error(), "status 404: xxx") || strings.Contains(err.Error(), strings.Repeat("x", 201)) {
		t.Fatalf("GetJSON of a 404 = %v, want the status and at most 200 bytes of the body", err)
	}
	if err := Post(ctx, c, srv.URL+"/reset", http.StatusNoContent); err != nil {
		t.Fatal(err)
	}
	if err := Post(ctx, c, srv.URL+"/reset", http.StatusOK); err == nil || !strings.Contains(err.Error(), "status 204, want 200") {
		t.Fatalf("Post with another status = %v", err)
	}
}

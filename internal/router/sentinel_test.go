package router

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// Markers the sentinel test plants where secrets and prompts travel.
const (
	promptMarker   = "PROMPT-SENTINEL-7f3a"
	badKeyMarker   = "KEY-SENTINEL-91bc"
	goodKeyMarker  = "GOODKEY-SENTINEL-22aa"
	upstreamMarker = "UPSTREAM-SENTINEL-55de"
	adminMarker    = "ADMIN-SENTINEL-0c4d"
)

// TestSentinel sends requests whose prompts, credentials and upstream
// bodies carry markers, through every router-produced error and every
// upstream failure, and checks that no router error body, log line, admin
// response, decision record, decision line, decision summary or decision
// file carries a marker, an address or raw Go error text.
func TestSentinel(t *testing.T) {
	keys, _ := apikeys.Parse([]byte(goodKeyMarker + "\n"))
	token, _ := apikeys.Parse([]byte("admin-token\n"))
	f := newFixture(t, fixtureOptions{keys: keys, adminToken: token, maxBody: 4096,
		decisionFile: filepath.Join(t.TempDir(), "decisions.jsonl")})
	auth := http.Header{"Authorization": {"Bearer " + goodKeyMarker}}
	admin := http.Header{"Authorization": {"Bearer admin-token"}}

	up := newUpstream(t, "gpu0", nil)
	release := make(chan struct{})
	up.handle(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Engine-Note", upstreamMarker)
		switch r.Header.Get("X-Mode") {
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"`+upstreamMarker+`"}`)
		case "reset":
			sseHeaders(w)
			writeEvents(w, "data: "+upstreamMarker+"\n\n")
			resetConnection(w)
		case "drop":
			closeConnection(w)
		case "hold":
			sseHeaders(w)
			writeEvents(w, "data: "+upstreamMarker+"\n\n")
			<-release
		case "stall":
			<-r.Context().Done()
		default:
			_, _ = io.WriteString(w, `{"content":"`+upstreamMarker+`"}`)
		}
	})
	refused := closedAddress(t)
	f.apply(
		sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 1}, {ID: "gpu1", Endpoint: up.srv.URL, Max: 1}}, tierMax(1)),
		sourcetest.Tier("ns/down", []string{"down"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: refused, Max: 1}}),
		sourcetest.Tier("ns/drop", []string{"drop"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 1}}),
		sourcetest.Tier("ns/slow", []string{"slow"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 1}}, timeouts(50*time.Millisecond, time.Minute)),
	)

	var produced []string // bodies the router itself produced.
	send := func(model, body string, header http.Header, wantStatus int, routerMade bool) {
		t.Helper()
		if body == "" {
			body = `{"model":"` + model + `","messages":[{"role":"user","content":"` + promptMarker + `"}]}`
		}
		resp, err := f.post(context.Background(), pathChatCompletions, body, header)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s: status %d %s, want %d", model, resp.StatusCode, data, wantStatus)
		}
		if routerMade {
			apierrortest.Code(t, data)
			produced = append(produced, string(data))
		}
		for k, v := range resp.Header {
			if k != "X-Engine-Note" {
				produced = append(produced, k+": "+strings.Join(v, ","))
			}
		}
		f.outcome()
	}
	with := func(h http.Header, k, v string) http.Header {
		c := h.Clone()
		c.Set(k, v)
		return c
	}

	send("llama", "", http.Header{"Authorization": {"Bearer " + badKeyMarker}}, 401, true)
	send("llama", "", http.Header{"Authorization": {badKeyMarker}}, 401, true)
	send("llama", `{"messages":"`+promptMarker+`"}`, auth, 400, true)
	send("llama", `{"model":"llama","messages":"`+promptMarker+`"`, auth, 400, true)
	send("MODEL-"+promptMarker, "", auth, 404, true)
	send("llama", `{"model":"llama","pad":"`+strings.Repeat(promptMarker, 300)+`"}`, auth, 413, true)
	send("llama", "", auth, 200, false)
	send("llama", "", with(auth, "X-Request-Id", "http://127.0.0.1:9/"+promptMarker), 200, false) // not a safe id: replaced.
	send("llama", "", with(auth, "X-Mode", "500"), 500, false)
	send("down", "", auth, 503, true) // its only member never saw the request: admitted again, refused.
	send("drop", "", with(auth, "X-Mode", "drop"), 502, true)
	send("slow", "", with(auth, "X-Mode", "stall"), 504, true)

	// A reset mid-body: the client sees a broken stream.
	resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), with(auth, "X-Mode", "reset"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	f.outcome()

	// Capacity exhausted while a stream holds the tier's only slot.
	held, err := f.post(context.Background(), pathChatCompletions, chat("llama"), with(auth, "X-Mode", "hold"))
	if err != nil {
		t.Fatal(err)
	}
	send("llama", "", auth, 503, true)

	var adminOut []string
	for _, path := range []string{"/admin/v1/capacity", "/admin/v1/tiers", "/admin/v1/tiers/ns/llama", "/admin/v1/tiers/ns/down", "/admin/v1/tiers/ns/none"} {
		_, body := f.adminGet(path, admin)
		adminOut = append(adminOut, string(body))
	}
	for _, query := range []string{"", "?member=gpu9", "?timeout=" + adminMarker} {
		_, body := f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/llama/drain"+query, admin)
		adminOut = append(adminOut, string(body))
	}
	_, body := f.adminGet("/admin/v1/capacity", http.Header{"Authorization": {"Bearer " + adminMarker}})
	adminOut = append(adminOut, string(body))

	close(release)
	_, _ = io.ReadAll(held.Body)
	_ = held.Body.Close()
	f.outcome()

	logs := f.logs.String()
	if !strings.Contains(logs, `"msg":"request"`) || !strings.Contains(logs, `"end":"upstream_unavailable"`) {
		t.Fatalf("the logs did not capture the requests: %s", logs)
	}
	forbidden := []string{
		promptMarker, badKeyMarker, goodKeyMarker, upstreamMarker, adminMarker,
		"127.0.0.1", strings.TrimPrefix(up.srv.URL, "http://"), strings.TrimPrefix(refused, "http://"),
		"dial tcp", "connection refused", "connection reset", "EOF", "context canceled", "context deadline", "http: ", "net/http",
	}
	check := func(what, text string) {
		t.Helper()
		for _, s := range forbidden {
			if strings.Contains(text, s) {
				t.Errorf("%s contains %q:\n%s", what, s, text)
			}
		}
	}
	for _, p := range produced {
		check("a router-produced response", p)
	}
	for _, a := range adminOut {
		check("an admin response", a)
	}
	check("the logs", logs)
	checkEvidenceSentinel(t, f, check)
}

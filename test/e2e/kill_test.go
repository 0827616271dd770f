package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// TestEngineKilledMidStreamReleasesLeases holds three streams open through
// the router, kills their engine with SIGKILL (no goodbye: the connections
// just reset) and checks that the clients' streams end without [DONE] and
// that the router's capacity view returns to zero active leases, for the
// tier and the member, with the router still serving.
func TestEngineKilledMidStreamReleasesLeases(t *testing.T) {
	const alias, streams = "e2e-kill", 3
	// 2000 tokens at 10 ms each: the streams would last 20 s.
	victim := startEngine(t, "victim", "--itl-base", "10ms")
	tr := tier{name: "kill", alias: alias, members: []member{{"victim", victim, 8}}}
	r := startRouter(t, tr)

	var open []*chatStream
	for range streams {
		open = append(open, openChatStream(t, r.baseURL(), alias, 2000))
	}
	r.awaitActive(t, tr.key(), streams)
	if s := victim.stats(t); s.InFlight != streams {
		t.Fatalf("engine has %d requests in flight, want %d", s.InFlight, streams)
	}

	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	for i, s := range open {
		tokens, done, err := s.finish()
		if done || tokens >= 2000 {
			t.Fatalf("stream %d completed (%d tokens) although its engine was killed", i, tokens)
		}
		t.Logf("stream %d ended after %d tokens: %v", i, tokens, err)
	}
	r.awaitActive(t, tr.key(), 0)

	// The router is still up; a new request to the dead member is answered
	// by the router (502 while the member still reads ready, 503 once its
	// probe failed) and leaves no lease behind either.
	if !r.Running() {
		t.Fatal("router exited")
	}
	resp, err := postJSON(context.Background(), r.baseURL()+"/chat/completions",
		`{"model":"`+alias+`","messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != http.StatusBadGateway && resp.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", resp.status, resp.body)
	}
	r.awaitActive(t, tr.key(), 0)
}

// Bounds of TestEngineKilledUnderLoad.
const (
	// killClients is how many clients stream at once, as the issue's
	// acceptance asks (8 clients, 3 engines).
	killClients = 8
	// killBefore and killAfter are how many requests end before the kill
	// and after it: enough for every client to have several streams on
	// every engine on either side of it.
	killBefore, killAfter = 48, 96
	// killTokens is each stream's length: at the engine's 5 ms per token,
	// about 100 ms, so a kill finds streams open on the victim.
	killTokens = 20
)

// killResult is how one client request of TestEngineKilledUnderLoad ended.
type killResult struct {
	id     string
	status int
	code   string // the router's error code, for a non-200 answer.
	done   bool   // a 200 stream read to data: [DONE].
	err    error
	// start and end are when the client sent the request and when it
	// ended.
	start, end time.Time
}

// ok reports whether the client got the whole stream.
func (r killResult) ok() bool { return r.err == nil && r.status == http.StatusOK && r.done }

// killRecord is the part of a decision record TestEngineKilledUnderLoad
// reads.
type killRecord struct {
	RequestID string `json:"request_id"`
	Outcome   string `json:"outcome"`
	Attempts  []struct {
		MemberID string `json:"member_id"`
		Ejection string `json:"ejection"`
	} `json:"attempts"`
}

// TestEngineKilledUnderLoad kills one of three engines with SIGKILL while
// 8 clients stream through a RoundRobin tier. From the router's decision
// log and the engines' own request logs (enginesim --request-log) it
// checks that every request a client saw fail was an attempt on the killed
// engine sent before the engine was reaped, so failures are at most the
// streams in flight on it at its death; that no request the dead engine
// refused reached a client as 502 or 503 while the other two could admit
// it (it went back to admission once); that no request reached two
// engines or one engine twice, and each reached only the member its record
// names; and that the tier served after the kill.
func TestEngineKilledUnderLoad(t *testing.T) {
	const alias = "e2e-kill-load"
	logDir := t.TempDir()
	var members []member
	engines := map[string]*engine{}
	for _, id := range []string{"victim", "x", "y"} {
		e := startEngine(t, id, "--itl-base", "5ms", "--request-log", filepath.Join(logDir, id+".jsonl"))
		engines[id] = e
		members = append(members, member{id, e, 8})
	}
	tr := tier{name: "kill-load", alias: alias, strategy: sluicev1.StrategyRoundRobin, members: members}
	decisions := filepath.Join(logDir, "decisions.jsonl")
	r := startRouterArgs(t, []string{"--decision-log-file", decisions}, tr)

	results := make(chan killResult, killClients*(killBefore+killAfter)) // never blocks: clients stop before they could fill it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range killClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				res := killRequest(r, alias, fmt.Sprintf("kill-%d-%d", c, i))
				res.start, res.end = start, time.Now()
				results <- res
			}
		}()
	}
	stopped := false
	stopClients := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopClients()

	var all []killResult
	collect := func(n int) {
		timer := time.NewTimer(waitTimeout)
		defer timer.Stop()
		for range n {
			select {
			case res := <-results:
				all = append(all, res)
			case <-timer.C:
				t.Fatalf("%d requests ended, want %d more within %v", len(all), n, waitTimeout)
			}
		}
	}
	collect(killBefore)
	killStart := time.Now()
	if err := engines["victim"].Kill(); err != nil {
		t.Fatal(err)
	}
	// Kill returns once the engine was reaped: its sockets are closed, so
	// the router's idle connections to it read closed and its port refuses.
	killed := time.Now()
	killedAt := len(all)
	collect(killAfter)
	stopClients()
	close(results)
	for res := range results {
		all = append(all, res)
	}
	r.awaitActive(t, tr.key(), 0)

	records := map[string]killRecord{}
	eventually(t, "one decision record per request", func() (bool, string) {
		raw, err := os.ReadFile(decisions) //nolint:gosec // the test's own temporary file.
		if err != nil {
			return false, err.Error()
		}
		clear(records)
		for l := range strings.Lines(string(raw)) {
			var rec killRecord
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("decision log: %v in %q", err, l)
			}
			records[rec.RequestID] = rec
		}
		return len(records) == len(all), fmt.Sprintf("%d records, %d requests", len(records), len(all))
	})
	seen := map[string][]string{} // request id → engines that logged it.
	for id := range engines {
		for _, l := range readRequestLog(t, filepath.Join(logDir, id+".jsonl")) {
			seen[l.ID] = append(seen[l.ID], id)
		}
	}
	for id, at := range seen {
		rec := records[id]
		if len(at) != 1 || len(rec.Attempts) != 1 || rec.Attempts[0].MemberID != at[0] {
			t.Errorf("request %s reached %v, its record %+v: want one engine, the record's member", id, at, rec)
		}
	}
	failed, inFlight, servedAfter := 0, 0, 0
	for i, res := range all {
		rec := records[res.id]
		onVictim := rec.Outcome == "admitted" && len(rec.Attempts) == 1 && rec.Attempts[0].MemberID == "victim"
		if onVictim && res.start.Before(killed) && res.end.After(killStart) {
			inFlight++
		}
		if res.ok() {
			if i >= killedAt {
				servedAfter++
			}
			continue
		}
		failed++
		switch {
		case !onVictim || !res.start.Before(killed):
			t.Errorf("request %s failed (%d %s: %v), record %+v, sent %v after the engine died: want an attempt on the killed engine, in flight at its death",
				res.id, res.status, res.code, res.err, rec, res.start.Sub(killed))
		case rec.Attempts[0].Ejection == "connection_refused":
			t.Errorf("request %s failed (%d %s) on a refused connection while two engines could admit it", res.id, res.status, res.code)
		}
	}
	if failed > inFlight {
		t.Errorf("%d requests failed, %d were in flight on the killed engine", failed, inFlight)
	}
	if servedAfter == 0 {
		t.Error("no request was served after the kill")
	}
	refused, _ := r.metric(`sluice_member_ejections_total{member="victim",reason="connection_refused",tier="` + tr.key() + `"}`)
	t.Logf("%d requests, %d failed of %d in flight on the killed engine, %d served after the kill, %v connections refused",
		len(all), failed, inFlight, servedAfter, refused)
}

// killRequest sends one streaming chat request with the given id and
// reads it to its end.
func killRequest(r *router, alias, id string) killResult {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res := killResult{id: id}
	resp, err := openChat(ctx, r, chatBody(alias, killTokens, true), http.Header{"X-Request-Id": {id}})
	if err != nil {
		res.err = err
		return res
	}
	res.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		_ = resp.Body.Close()
		res.code = errorCode(body)
		return res
	}
	s := readStream(resp)
	res.done, res.err = s.done, s.err
	return res
}

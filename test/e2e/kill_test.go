package e2e

import (
	"context"
	"net/http"
	"testing"
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

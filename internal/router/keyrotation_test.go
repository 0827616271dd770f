package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/apikeys/apikeystest"
)

// maxRotationChecks bounds the client loop of TestKeyRotation: enough
// requests to span the swap many times over on a slow machine.
const maxRotationChecks = 200_000

// TestKeyRotation rotates the API key by the kubelet's symbolic-link swap
// while a client keeps calling the router with the old key, then the new
// one: at no moment are both refused, the old key works until the new set
// is loaded (two equal reads), the new one from then on.
func TestKeyRotation(t *testing.T) {
	secret := apikeystest.NewSecretDir(t, "old-key\n")
	k, err := apikeys.Load(secret.Path())
	if err != nil {
		t.Fatal(err)
	}
	rt := New(Options{Keys: k})
	defer rt.Close()
	front := httptest.NewServer(rt)
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{}}
	status := func(key string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, front.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	// The client: each round tries the old key, then the new one. Once the
	// old one is refused the swap has happened, so the new one must work.
	stop := make(chan struct{})
	sawOld, sawNew := make(chan struct{}), make(chan struct{})
	type result struct{ checks, neither int }
	done := make(chan result, 1)
	go func() {
		var res result
		oldSeen, newSeen := false, false
		for ; res.checks < maxRotationChecks; res.checks++ {
			select {
			case <-stop:
				done <- res
				return
			default:
			}
			switch {
			case status("old-key") == http.StatusOK:
				if !oldSeen {
					oldSeen = true
					close(sawOld)
				}
			case status("new-key") == http.StatusOK:
				if !newSeen {
					newSeen = true
					close(sawNew)
				}
			default:
				res.neither++
			}
		}
		done <- res
	}()
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(failSafe):
			t.Fatalf("the client never saw %s", what)
		}
	}

	h := apikeystest.StartWatch(t, secret.Path(), k)
	wait(sawOld, "the old key accepted")
	h.Step() // unchanged file: nothing to do.
	h.NoReport()

	secret.Update(map[string]string{"keys": "new-key\n"})
	h.Step() // first read of the new content: not served yet.
	h.NoReport()
	if !apikeystest.Allows(k, "old-key") || apikeystest.Allows(k, "new-key") {
		t.Fatal("the new set was served after one read")
	}
	h.Step() // second, equal read: served.
	if r := h.Report(); r.Err != nil || r.Keys != 1 {
		t.Fatalf("report = %+v", r)
	}
	if apikeystest.Allows(k, "old-key") || !apikeystest.Allows(k, "new-key") {
		t.Fatal("the new set is not served after two equal reads")
	}
	wait(sawNew, "the new key accepted")
	close(stop)
	select {
	case res := <-done:
		if res.neither != 0 {
			t.Fatalf("%d of %d rounds had neither key accepted", res.neither, res.checks)
		}
	case <-time.After(failSafe):
		t.Fatal("the client loop did not stop")
	}
}

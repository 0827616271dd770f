package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProxyTakesEnginesInTurn(t *testing.T) {
	var engines []string
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, name+" "+r.URL.Path+" "+string(body)) //nolint:gosec // the test's own echo.
		}))
		defer srv.Close()
		engines = append(engines, srv.URL)
	}
	p, err := newProxy(engines)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	var got []string
	for range 4 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, front.URL+"/v1/chat/completions", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		got = append(got, string(b))
	}
	want := "a /v1/chat/completions {}|b /v1/chat/completions {}|a /v1/chat/completions {}|b /v1/chat/completions {}"
	if strings.Join(got, "|") != want {
		t.Fatalf("answers %q, want %q", got, want)
	}
}

func TestBadEngineURLs(t *testing.T) {
	for _, args := range [][]string{nil, {"127.0.0.1:8000"}, {"ftp://127.0.0.1:8000"}, {"http://"}} {
		if _, err := newProxy(args); err == nil {
			t.Errorf("newProxy(%q) accepted", args)
		}
	}
}

func TestRunLogsItsAddressAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0", "http://127.0.0.1:1"}, w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "bareproxy listening on 127.0.0.1:") {
		t.Fatalf("first line %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop")
	}
	_ = w.Close()
}

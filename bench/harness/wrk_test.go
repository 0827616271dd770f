//go:build linux

package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// wrkSample is real `wrk --latency` output (wrk 4.1.0, Debian 12).
const wrkSample = `Running 3s test @ http://127.0.0.1:18090/v1/chat/completions
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.28ms    1.14ms  20.38ms   92.11%
    Req/Sec    13.71k     1.36k   16.61k    70.00%
  Latency Distribution
     50%    1.05ms
     75%    1.51ms
     90%    2.14ms
     99%    6.10ms
  81883 requests in 3.00s, 32.43MB read
Requests/sec:  27281.25
Transfer/sec:     10.81MB
`

// wrkFailing has non-2xx responses, socket errors and second units.
const wrkFailing = `Running 5s test @ http://127.0.0.1:8080/v1/chat/completions
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   107.70us  417.28us    1.20s   97.17%
    Req/Sec    21.59k     3.55k   27.16k    66.67%
  Latency Distribution
     50%   39.00us
     75%   53.00us
     90%   80.00us
     99%    1.20s
  64457 requests in 1.00m, 25.50MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 12
Requests/sec:  21472.28
Transfer/sec:      8.49MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkSample)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 81883 || r.Seconds != 3 || r.RPS != 27281.25 {
		t.Fatalf("requests/seconds/rps = %d/%v/%v", r.Requests, r.Seconds, r.RPS)
	}
	want := map[float64]float64{50: 1050, 75: 1510, 90: 2140, 99: 6100}
	for p, us := range want {
		if math.Abs(r.LatencyUS[p]-us) > 1e-6 {
			t.Errorf("p%g = %v µs, want %v", p, r.LatencyUS[p], us)
		}
	}
	if r.P50US != 1050 || r.P99US != 6100 {
		t.Errorf("P50US/P99US = %v/%v", r.P50US, r.P99US)
	}
	if err := r.check(); err != nil {
		t.Errorf("check() = %v, want nil", err)
	}

	f, err := parseWrk(wrkFailing)
	if err != nil {
		t.Fatal(err)
	}
	if f.Non2xx != 12 || f.SocketErrors != 3 || f.Seconds != 60 || f.LatencyUS[99] != 1.2e6 || f.LatencyUS[50] != 39 {
		t.Fatalf("failing run parsed as %+v", f)
	}
	if err := f.check(); !errors.Is(err, errWrkFailures) {
		t.Fatalf("check() = %v, want errWrkFailures", err)
	}
}

func TestParseWrkMissingFigures(t *testing.T) {
	tests := []struct {
		name string
		out  string
	}{
		{name: "empty", out: ""},
		{name: "no latency distribution", out: strings.Replace(wrkSample, "Latency Distribution", "Something", 1)},
		{name: "no requests/sec", out: strings.Replace(wrkSample, "Requests/sec:", "Reqs:", 1)},
		{name: "bad unit", out: strings.Replace(wrkSample, "1.05ms", "1.05xs", 1)},
		{name: "connection refused", out: "unable to connect to 127.0.0.1:1 Connection refused\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseWrk(tc.out); !errors.Is(err, errWrkOutput) {
				t.Fatalf("parseWrk error = %v, want errWrkOutput", err)
			}
		})
	}
}

func TestParseWrkDuration(t *testing.T) {
	tests := map[string]float64{"57.00us": 57, "1.05ms": 1050, "2.00s": 2e6, "1.50m": 90e6, "0.00us": 0}
	for in, want := range tests {
		got, err := parseWrkDuration(in)
		if err != nil || math.Abs(got-want) > 1e-6 {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ms", "-1us", "12", "1.0ns"} {
		if _, err := parseWrkDuration(in); err == nil {
			t.Errorf("parseWrkDuration(%q) succeeded", in)
		}
	}
}

func TestWrkRunArgs(t *testing.T) {
	w := wrkRun{URL: "http://127.0.0.1:1/v1/chat/completions", Script: "/s.lua", Threads: 2, Connections: 32, Duration: 4 * time.Second}
	got := strings.Join(w.args(), " ")
	if want := "-t 2 -c 32 -d 4s --latency -s /s.lua http://127.0.0.1:1/v1/chat/completions"; got != want {
		t.Fatalf("args = %q, want %q", got, want)
	}
	if s := wrkScript(`{"model":"m"}`); !strings.Contains(s, `wrk.body = [[{"model":"m"}]]`) || !strings.Contains(s, `wrk.method = "POST"`) {
		t.Fatalf("script = %q", s)
	}
}

package startlines

import "testing"

func TestAddressMatchers(t *testing.T) {
	var addr string
	match := EngineAddr(&addr)
	for _, line := range []string{
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"shutting down"}`,
		`{"level":"INFO","msg":"listening"}`,
		// The text format is for a person; the programs are started in JSON.
		`time=2026-01-01T00:00:00Z level=INFO msg=listening addr=127.0.0.1:41234`,
		"not json",
	} {
		if match([]byte(line)) {
			t.Fatalf("matched %s", line)
		}
	}
	if !match([]byte(`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"listening","addr":"127.0.0.1:41234","model":"m","flavor":"vllm"}`)) || addr != "127.0.0.1:41234" {
		t.Fatalf("engine addr %q", addr)
	}
	var front, admin string
	rm := RouterAddrs(&front, &admin)
	if rm([]byte(`{"level":"WARN","msg":"no --api-keys-file: the front door accepts every request"}`)) || rm([]byte("not json")) {
		t.Fatal("matched a non-start line")
	}
	if rm([]byte(`{"level":"INFO","msg":"router started","listen":"127.0.0.1:1"}`)) {
		t.Fatal("matched a start line without the admin address")
	}
	if !rm([]byte(`{"level":"INFO","msg":"router started","node":"n","listen":"127.0.0.1:1","admin_listen":"127.0.0.1:2"}`)) ||
		front != "127.0.0.1:1" || admin != "127.0.0.1:2" {
		t.Fatalf("router addrs %q %q", front, admin)
	}
}

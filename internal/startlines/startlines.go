// Package startlines reads the start lines the router and the engine
// simulator log, which name the addresses they listen on. The demo, the
// chaos soak, the benchmark harness and the multi-process tests start the
// real binaries on port 0 and learn their ports from these lines, so this
// package is the one place that knows their format: the router's JSON line
// `"msg":"router started"` with `listen` and `admin_listen`, and
// enginesim's text line `msg=listening addr=HOST:PORT`. Its matchers are
// the ready matchers of internal/supervise.
package startlines

import (
	"encoding/json"
	"regexp"
)

// routerStartedMsg is the message of the router's start line (cmd/router).
const routerStartedMsg = "router started"

// engineListenRE matches enginesim's "listening" log line (slog text).
var engineListenRE = regexp.MustCompile(`\bmsg=listening addr=(\S+)`)

// EngineAddr returns a line matcher that accepts enginesim's listen line and
// stores its address in *addr.
func EngineAddr(addr *string) func(line []byte) bool {
	return func(line []byte) bool {
		m := engineListenRE.FindSubmatch(line)
		if m == nil {
			return false
		}
		*addr = string(m[1])
		return true
	}
}

// RouterAddrs returns a line matcher that accepts the router's start line
// (slog JSON) and stores its front-door and admin listen addresses.
func RouterAddrs(front, admin *string) func(line []byte) bool {
	return func(line []byte) bool {
		var l struct {
			Msg         string `json:"msg"`
			Listen      string `json:"listen"`
			AdminListen string `json:"admin_listen"`
		}
		if json.Unmarshal(line, &l) != nil || l.Msg != routerStartedMsg || l.Listen == "" || l.AdminListen == "" {
			return false
		}
		*front, *admin = l.Listen, l.AdminListen
		return true
	}
}

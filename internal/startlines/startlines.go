// Package startlines reads the start lines the router and the engine
// simulator log, which name the addresses they listen on. The demo, the
// chaos soak, the benchmark harness and the multi-process tests start the
// real binaries on port 0 and learn their ports from these lines, so this
// package is the one place that knows them: both programs log one JSON
// object a line by default (docs/CONFIGURATION.md#12-every-programs-command-line),
// the router `"msg":"router started"` with `listen` and `admin_listen`,
// enginesim `"msg":"listening"` with `addr`. Its matchers are the ready
// matchers of internal/supervise.
package startlines

import "encoding/json"

// Start line messages (cmd/router, cmd/enginesim).
const (
	routerStartedMsg = "router started"
	engineListenMsg  = "listening"
)

// startLine is the part of a start line the matchers read.
type startLine struct {
	Msg         string `json:"msg"`
	Addr        string `json:"addr"`
	Listen      string `json:"listen"`
	AdminListen string `json:"admin_listen"`
}

// parse reads line as a JSON log line; ok is false for anything else.
func parse(line []byte) (l startLine, ok bool) {
	return l, json.Unmarshal(line, &l) == nil
}

// EngineAddr returns a line matcher that accepts enginesim's listen line and
// stores its address in *addr.
func EngineAddr(addr *string) func(line []byte) bool {
	return func(line []byte) bool {
		l, ok := parse(line)
		if !ok || l.Msg != engineListenMsg || l.Addr == "" {
			return false
		}
		*addr = l.Addr
		return true
	}
}

// RouterAddrs returns a line matcher that accepts the router's start line
// and stores its front-door and admin listen addresses.
func RouterAddrs(front, admin *string) func(line []byte) bool {
	return func(line []byte) bool {
		l, ok := parse(line)
		if !ok || l.Msg != routerStartedMsg || l.Listen == "" || l.AdminListen == "" {
			return false
		}
		*front, *admin = l.Listen, l.AdminListen
		return true
	}
}

package router

import (
	"maps"
	"net/http"

	"github.com/sluice-dev/sluice/internal/reqbody"
)

// readmit admits once more a request whose first member never saw it
// (exchange.notSent: the connection was refused, or a fresh one reset
// before the first request byte was written). The first exchange's lease
// is released and its member ejected already. The request goes through
// admission again with that member left out (reacquire) and gets a new
// exchange, which is never admitted a third time. Like the first admission
// it may wait in the tier's queue; when admission refuses, the client gets
// that refusal (503 or 429 with Retry-After), as any request admission
// refuses. The request's body buffers move from ex to the new
// exchange, or are released here. It returns nil when it answered the
// request itself (docs/ROUTER.md#a-request-the-engine-cannot-have-seen).
func (rt *Router) readmit(w http.ResponseWriter, r *http.Request, ex *exchange) *exchange {
	o := ex.outcome
	// The first attempt's fields; the member stays in NotSentMember.
	o.Result, o.Member, o.Dispatch, o.Selection = "", "", 0, nil
	held := ex.held
	ex.held = heldBodies{}
	defer held.release()
	ts := ex.tier
	delete(w.Header(), headerMember)

	lease, cfg, err := rt.acquire(ex.in, ts, ex.who, o.NotSentMember, &o)
	if err != nil {
		rt.notAdmitted(w, r, held[0].Bytes(), &o, err)
		return nil
	}
	route := rt.leased(ts, cfg, lease, &o)
	model, _ := reqbody.FindModel(held[0].Bytes()) // the body passed this check in admit.
	body := held.rewrite(rt.bodies, model, cfg.UpstreamModel())
	next := rt.newExchange(ts, cfg, ex.who, route, lease, &o, held, body, ex.idHeader, r)
	next.readmitted = true
	held = heldBodies{} // the new exchange releases them now.
	return rt.begin(w, next)
}

// withoutMember returns a copy of ready with member not ready, or ready
// itself when it does not name member (a reconfiguration dropped it).
func withoutMember(ready map[string]bool, member string) map[string]bool {
	if !ready[member] {
		return ready
	}
	out := maps.Clone(ready)
	out[member] = false
	return out
}

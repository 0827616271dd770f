package adminserver

// The drain wait (POST /admin/v1/tiers/{namespace}/{name}/drain).

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/admission"
)

// Bounds of the drain endpoint's timeout parameter.
const (
	// DefaultDrainTimeout is the drain wait when the request names none.
	DefaultDrainTimeout = 30 * time.Second
	// MaxDrainTimeout bounds one drain wait; a longer wait is a loop of
	// calls, which keeps every HTTP hop's idle timeouts meaningful.
	MaxDrainTimeout = 10 * time.Minute
)

// drain waits until an already quiesced scope holds no lease. It never
// quiesces, readmits or cancels anything.
func (a *Admin) drain(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	ts, _ := a.set.Table().Lookup(key)
	if ts == nil {
		errTierNotFound.Write(w)
		return
	}
	timeout := DefaultDrainTimeout
	if s := r.URL.Query().Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > MaxDrainTimeout {
			errBadTimeout.Write(w)
			return
		}
		timeout = d
	}
	member := r.URL.Query().Get("member")
	scope := admission.TierScope()
	if member != "" {
		if len(ts.Config().IDs()) == 1 {
			// A direct tier's intent is the tier's (docs/API.md): its one
			// member is never quiesced on its own.
			errDirectTierMember.Write(w)
			return
		}
		scope = admission.MemberScope(member)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	err := ts.Admission().Drain(ctx, scope)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, adminapi.DrainView{Tier: key, Member: member, Drained: true})
	case errors.Is(err, admission.ErrUnknownMember):
		errMemberNotFound.Write(w)
	case errors.Is(err, admission.ErrNotQuiesced):
		errNotQuiesced.Write(w)
	case r.Context().Err() != nil:
		// The caller went away; nobody is listening.
	default:
		errDrainTimeout.Write(w)
	}
}

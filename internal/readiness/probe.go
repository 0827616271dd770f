package readiness

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/memberhttp"
)

const (
	// ProbeTimeout bounds one models request, and is the elapsed time (by
	// the Cache's clock) after which a probe counts as not ready even if it
	// succeeded (docs/PRESSURE.md#readiness-internalreadiness).
	ProbeTimeout = time.Second

	// MaxBodyBytes bounds a models body. A model list is a few hundred bytes
	// per model; 1 MiB is generous for any engine while keeping a misbehaving
	// endpoint from costing the router memory. One byte more is read to tell
	// "exactly 1 MiB" from "larger".
	MaxBodyBytes = 1 << 20

	// ModelsPath is the OpenAI model list path, appended to the member
	// endpoint.
	ModelsPath = "/v1/models"
)

// Target is everything a Prober needs to qualify one member.
type Target struct {
	// ModelsURL is the absolute URL of the member's model list.
	ModelsURL string
	// ServedModel is the model id the member must list exactly.
	ServedModel string
}

// Prober qualifies one member: a nil error means the member serves the
// target's model. Probe must honour ctx, which the Cache cancels when it
// stops or the member is removed; the Cache additionally counts any probe
// longer than ProbeTimeout by its clock as not ready.
type Prober interface {
	// Probe checks that the member lists the served model.
	Probe(ctx context.Context, target Target) error
}

// HTTPProber is the Prober that GETs the model list over HTTP with
// ProbeTimeout, reads at most MaxBodyBytes+1 bytes and follows no redirects.
type HTTPProber struct {
	// Client sends the requests. Its zero value (nil) uses a client with
	// ProbeTimeout, no proxy and no redirects; a caller-supplied client's own
	// timeout and redirect policy apply in addition to ProbeTimeout.
	Client *http.Client
}

// defaultClient is shared by every HTTPProber without a Client so that
// connections to a member are reused across probes.
var defaultClient = memberhttp.NewClient(ProbeTimeout)

// modelList is the OpenAI list shape. Pointers tell an absent field from an
// empty one.
type modelList struct {
	Object *string `json:"object"`
	Data   *[]struct {
		ID string `json:"id"`
		// OwnedBy is kept raw: an engine that writes it as something
		// other than a string is still ready.
		OwnedBy json.RawMessage `json:"owned_by"`
	} `json:"data"`
}

// Probe implements Prober. Its errors never contain the URL, the address or
// the body.
func (p HTTPProber) Probe(ctx context.Context, target Target) error {
	body, err := memberhttp.Get(ctx, cmp.Or(p.Client, defaultClient), target.ModelsURL, "application/json", ProbeTimeout, MaxBodyBytes)
	if err != nil {
		return err
	}
	return CheckModelList(body, target.ServedModel)
}

// CheckModelList reports whether body is an OpenAI model list
// ({"object":"list","data":[{"id":...}, ...]}) containing an entry whose id
// equals servedModel exactly (byte for byte: no prefix, case or whitespace
// folding). It returns nil, ErrMalformedResponse or ErrModelNotServed.
func CheckModelList(body []byte, servedModel string) error {
	_, err := ModelOwner(body, servedModel)
	return err
}

// ModelOwner checks body as CheckModelList does and returns the owned_by
// field of servedModel's entry (vLLM writes "vllm"); empty when it is
// absent or not a string.
func ModelOwner(body []byte, servedModel string) (string, error) {
	var l modelList
	if err := json.Unmarshal(body, &l); err != nil {
		return "", ErrMalformedResponse
	}
	if l.Object == nil || *l.Object != "list" || l.Data == nil {
		return "", ErrMalformedResponse
	}
	for _, m := range *l.Data {
		if servedModel != "" && m.ID == servedModel {
			var owner string
			_ = json.Unmarshal(m.OwnedBy, &owner) // not a string: no owner.
			return owner, nil
		}
	}
	return "", ErrModelNotServed
}

// ModelsURL returns the model list URL of a member endpoint: the endpoint
// with ModelsPath appended. The endpoint must be an absolute http or https
// URL with a host and without userinfo, query or fragment; otherwise the
// error is ErrInvalidEndpoint.
func ModelsURL(endpoint string) (string, error) {
	return memberhttp.JoinURL(endpoint, ModelsPath)
}

package router

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apikeys"
)

func TestParseTenantHeader(t *testing.T) {
	for _, tt := range []struct {
		name, want string
	}{
		{"", ""},
		{GatewayFairnessHeader, "X-Gateway-Inference-Fairness-Id"},
		{"X-Tenant", "X-Tenant"},
		{"x-team_id", "X-Team_id"},
	} {
		if got, err := ParseTenantHeader(tt.name); err != nil || got != tt.want {
			t.Errorf("ParseTenantHeader(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name, wantErr string
	}{
		{"x tenant", "not a header name"},
		{"x-tenant:", "not a header name"},
		{"x-t\u00e9nant", "not a header name"},
		{strings.Repeat("x", maxHeaderNameLength+1), "not a header name of at most 64 bytes"},
		{"authorization", "Authorization carries credentials"},
		{"Proxy-Authorization", "carries credentials"},
		{"cookie", "carries credentials"},
		{"Host", "describes the connection"},
		{"connection", "describes the connection"},
		{"Keep-Alive", "describes the connection"},
		{"te", "describes the connection"},
		{"Upgrade", "describes the connection"},
	} {
		got, err := ParseTenantHeader(tt.name)
		if got != "" || !errors.Is(err, ErrTenantHeader) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseTenantHeader(%q) = %q, %v; want ErrTenantHeader containing %q", tt.name, got, err, tt.wantErr)
		}
	}
}

// TestTenantOf: with the tenant header on, one valid value names the
// tenant and the key's priority stays; an absent, repeated or invalid
// value, or the header off, leaves the key's tenant.
func TestTenantOf(t *testing.T) {
	key := admission.Tenant{Name: "acme", Priority: 5}
	long := strings.Repeat("t", apikeys.MaxTenantNameLength)
	for _, tt := range []struct {
		desc   string
		header string // Options.TenantHeader
		values []string
		want   admission.Tenant
	}{
		{desc: "header off", header: "", values: []string{"team"}, want: key},
		{desc: "absent", header: GatewayFairnessHeader, want: key},
		{desc: "one valid value", header: GatewayFairnessHeader, values: []string{"team-b"}, want: admission.Tenant{Name: "team-b", Priority: 5}},
		{desc: "longest name", header: "X-Tenant", values: []string{long}, want: admission.Tenant{Name: long, Priority: 5}},
		{desc: "repeated", header: GatewayFairnessHeader, values: []string{"team-b", "team-b"}, want: key},
		{desc: "a list in one value", header: GatewayFairnessHeader, values: []string{"team-b, team-c"}, want: key},
		{desc: "empty", header: GatewayFairnessHeader, values: []string{""}, want: key},
		{desc: "upper case", header: GatewayFairnessHeader, values: []string{"Team"}, want: key},
		{desc: "too long", header: GatewayFairnessHeader, values: []string{long + "t"}, want: key},
		{desc: "not ASCII", header: GatewayFairnessHeader, values: []string{"t\u00e9am"}, want: key},
		{desc: "priority-like", header: GatewayFairnessHeader, values: []string{"team priority=1000"}, want: key},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			rt := New(Options{TenantHeader: tt.header})
			defer rt.Close()
			r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil) //nolint:noctx // Never sent.
			r.Header.Set("X-Other", "other-team")
			for _, v := range tt.values {
				r.Header.Add(GatewayFairnessHeader, v)
				r.Header.Add("X-Tenant", v)
			}
			if got := rt.tenantOf(r, key); got != tt.want {
				t.Fatalf("tenantOf = %+v, want %+v", got, tt.want)
			}
			if n := testing.AllocsPerRun(100, func() { rt.tenantOf(r, key) }); n != 0 {
				t.Fatalf("tenantOf allocates %v times per call", n)
			}
		})
	}
	// The unnamed tenant of a key without a name is named by the header
	// too, at that key's priority.
	rt := New(Options{TenantHeader: GatewayFairnessHeader})
	defer rt.Close()
	r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil) //nolint:noctx // Never sent.
	r.Header.Set(GatewayFairnessHeader, "team-b")
	if got := rt.tenantOf(r, admission.Tenant{Priority: -3}); got != (admission.Tenant{Name: "team-b", Priority: -3}) {
		t.Fatalf("tenantOf of the unnamed tenant = %+v", got)
	}
}

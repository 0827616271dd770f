package apikeys_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/apikeys/apikeystest"
)

func TestParseKeys(t *testing.T) {
	for _, tt := range []struct {
		desc    string
		data    string
		want    int
		wantErr string
	}{
		{desc: "keys, comments and blanks", data: "# router keys\nkey-one\n\n  key-two  \n", want: 2},
		{desc: "no key", data: "# nothing\n\n", wantErr: "no key"},
		{desc: "space inside", data: "a b\n", wantErr: "line 1 contains a space"},
		{desc: "too long", data: strings.Repeat("k", apikeys.MaxKeyLength+1), wantErr: "longer than"},
		{desc: "too many", data: strings.Repeat("k\n", apikeys.MaxKeys+1), wantErr: "more than"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			k, err := apikeys.Parse([]byte(tt.data))
			if tt.wantErr != "" {
				if !errors.Is(err, apikeys.ErrInvalidKeys) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrInvalidKeys containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || k.Len() != tt.want {
				t.Fatalf("got %v keys, %v; want %d", k, err, tt.want)
			}
		})
	}
}

func TestKeysAllow(t *testing.T) {
	k, _ := apikeys.Parse([]byte("alpha\nbeta\n"))
	for _, tt := range []struct {
		header string
		want   bool
	}{
		{"Bearer alpha", true},
		{"bearer beta", true},
		{"BEARER  beta ", true},
		{"Bearer gamma", false},
		{"Bearer alph", false},
		{"Bearer alphaa", false},
		{"Bearer ", false},
		{"Basic alpha", false},
		{"alpha", false},
		{"", false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		if got := k.Allow(r); got != tt.want {
			t.Errorf("Allow(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
	var open *apikeys.Keys
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	if !open.Allow(r) {
		t.Error("a nil *Keys must allow every request")
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	if err := os.WriteFile(good, []byte("secret-key-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := apikeys.Load(good); err != nil || k.Len() != 1 {
		t.Fatalf("Load = %v, %v", k, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("secret with-space\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := apikeys.Load(bad)
	if !errors.Is(err, apikeys.ErrInvalidKeys) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want ErrInvalidKeys naming the file", err)
	}
	if strings.Contains(strings.ReplaceAll(err.Error(), bad, ""), "secret") {
		t.Fatalf("the error quotes the key: %v", err)
	}
	if _, err := apikeys.Load(filepath.Join(dir, "missing")); !errors.Is(err, apikeys.ErrInvalidKeys) {
		t.Fatalf("missing file: %v", err)
	}
}

// BenchmarkKeysAllow measures the key check of every request: a matching
// 51-byte key among two. It must not allocate.
func BenchmarkKeysAllow(b *testing.B) {
	k, err := apikeys.Parse([]byte("sk-" + strings.Repeat("a", 48) + "\nsk-" + strings.Repeat("b", 48) + "\n"))
	if err != nil {
		b.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	r.Header.Set("Authorization", "Bearer sk-"+strings.Repeat("b", 48))
	b.ReportAllocs()
	for b.Loop() {
		if !k.Allow(r) {
			b.Fatal("the key was refused")
		}
	}
}

func TestKeysAllowDoesNotAllocate(t *testing.T) {
	k, _ := apikeys.Parse([]byte("alpha\n"))
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	r.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 100))
	if n := testing.AllocsPerRun(100, func() { k.Allow(r) }); n != 0 {
		t.Fatalf("Allow allocates %v times per call", n)
	}
	r.Header.Set("Authorization", "Bearer "+strings.Repeat("x", apikeys.MaxKeyLength+1))
	if k.Allow(r) {
		t.Fatal("a token longer than any key was allowed")
	}
	if (&apikeys.Keys{}).Allow(r) {
		t.Fatal("the zero Keys allowed a request")
	}
}

// authenticate returns what k.Authenticate says of a request presenting
// key.
func authenticate(k *apikeys.Keys, key string) (admission.Tenant, bool) {
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	r.Header.Set("Authorization", "Bearer "+key)
	return k.Authenticate(r)
}

// TestParseKeysOldFiles: files written before keys had attributes read as
// they did, every key in the unnamed tenant at priority 0: bytes other
// than a space or a tab (a vertical tab, a no-break space, '=') stay inside
// the key, and a key given twice is one key given twice.
func TestParseKeysOldFiles(t *testing.T) {
	for _, tt := range []struct {
		desc string
		data string
		keys []string
	}{
		{desc: "plain", data: "# router keys\nkey-one\n\n  key-two  \n", keys: []string{"key-one", "key-two"}},
		{desc: "CRLF", data: "key-one\r\nkey-two\r\n", keys: []string{"key-one", "key-two"}},
		{desc: "base64 padding", data: "c2VjcmV0==\n", keys: []string{"c2VjcmV0=="}},
		{desc: "tenant-like key", data: "tenant=a\npriority=3\n", keys: []string{"tenant=a", "priority=3"}},
		{desc: "vertical tab inside", data: "key\vone\n", keys: []string{"key\vone"}},
		{desc: "no-break space inside", data: "key\u00a0one\n", keys: []string{"key\u00a0one"}},
		{desc: "twice", data: "key-one\nkey-one\n", keys: []string{"key-one", "key-one"}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			k, err := apikeys.Parse([]byte(tt.data))
			if err != nil || k.Len() != len(tt.keys) {
				t.Fatalf("Parse = %v keys, %v; want %d", k.Len(), err, len(tt.keys))
			}
			for _, key := range tt.keys {
				if tenant, ok := authenticate(k, key); !ok || tenant != (admission.Tenant{}) {
					t.Errorf("Authenticate(%q) = %+v, %v; want the unnamed tenant at 0", key, tenant, ok)
				}
			}
		})
	}
}

// TestParseKeysTenants: a key line's attributes name its tenant and
// priority, in either order, separated by spaces or tabs; keys may share
// a tenant at one priority; a key without a tenant is the unnamed tenant's.
func TestParseKeysTenants(t *testing.T) {
	long := strings.Repeat("a", apikeys.MaxTenantNameLength)
	data := strings.Join([]string{
		"# keys with tenants",
		"k-plain",
		"k-named tenant=acme",
		"k-both tenant=batch.jobs_2-x priority=-1000",
		"  k-swapped\tpriority=1000 \t tenant=online  ",
		"k-rotated tenant=acme",
		"k-prio priority=0",
		"k-long tenant=" + long + " priority=+7",
		"k-named tenant=acme",
		"",
	}, "\n")
	k, err := apikeys.Parse([]byte(data))
	if err != nil || k.Len() != 8 {
		t.Fatalf("Parse = %v keys, %v", k.Len(), err)
	}
	for _, tt := range []struct {
		key  string
		want admission.Tenant
	}{
		{"k-plain", admission.Tenant{}},
		{"k-named", admission.Tenant{Name: "acme"}},
		{"k-both", admission.Tenant{Name: "batch.jobs_2-x", Priority: admission.MinPriority}},
		{"k-swapped", admission.Tenant{Name: "online", Priority: admission.MaxPriority}},
		{"k-rotated", admission.Tenant{Name: "acme"}},
		{"k-prio", admission.Tenant{}},
		{"k-long", admission.Tenant{Name: long, Priority: 7}},
	} {
		if got, ok := authenticate(k, tt.key); !ok || got != tt.want {
			t.Errorf("Authenticate(%s) = %+v, %v; want %+v", tt.key, got, ok, tt.want)
		}
	}
	for _, refused := range []string{"k-both tenant=batch.jobs_2-x", "tenant=acme", "acme", ""} {
		if got, ok := authenticate(k, refused); ok || got != (admission.Tenant{}) {
			t.Errorf("Authenticate(%q) = %+v, %v; want refused", refused, got, ok)
		}
	}
}

// TestParseKeysRefusesAttributes: an attribute that is unknown, repeated,
// invalid, or lines that disagree on a key's or tenant's attributes refuse
// the whole file, with an error naming the line and quoting neither the key
// nor the tenant nor the priority.
func TestParseKeysRefusesAttributes(t *testing.T) {
	const key = "sekrit-token"
	for _, tt := range []struct {
		desc    string
		lines   []string
		wantErr string
	}{
		{"unknown attribute", []string{"k0", key + " colour=red"}, "line 2: field 2 is not a known attribute"},
		{"attribute name case", []string{key + " Tenant=team"}, "line 1: field 2 is not a known attribute"},
		{"key split by a space", []string{key + " more-of-it"}, "line 1 contains a space, and field 2 is not an attribute"},
		{"third field", []string{"", key + " tenant=team extra"}, "line 2 contains a space, and field 3 is not an attribute"},
		{"tenant twice", []string{key + " tenant=team tenant=team"}, "line 1 gives tenant twice"},
		{"priority twice", []string{"#", key + " priority=777 tenant=team priority=777"}, "line 2 gives priority twice"},
		{"empty tenant", []string{key + " tenant="}, "line 1: the tenant is not"},
		{"upper-case tenant", []string{key + " tenant=Team"}, "line 1: the tenant is not"},
		{"tenant begins with '-'", []string{key + " tenant=-team"}, "line 1: the tenant is not"},
		{"tenant ends with '.'", []string{key + " tenant=team."}, "line 1: the tenant is not"},
		{"tenant with '/'", []string{key + " tenant=ns/team"}, "line 1: the tenant is not"},
		{"tenant not ASCII", []string{key + " tenant=t\u00e9am"}, "line 1: the tenant is not"},
		{"tenant too long", []string{key + " tenant=" + strings.Repeat("t", apikeys.MaxTenantNameLength+1)}, "line 1: the tenant is not"},
		{"priority above", []string{key + " priority=1001"}, "line 1: the priority is not an integer within -1000..1000"},
		{"priority below", []string{key + " priority=-1001"}, "line 1: the priority is not an integer"},
		{"priority not a number", []string{key + " priority=high"}, "line 1: the priority is not an integer"},
		{"priority fraction", []string{key + " priority=7.5"}, "line 1: the priority is not an integer"},
		{"priority empty", []string{key + " priority="}, "line 1: the priority is not an integer"},
		{"priority overflows", []string{key + " priority=99999999999999999999"}, "line 1: the priority is not an integer"},
		{"tenant with two priorities", []string{"k1 tenant=team priority=777", "", key + " tenant=team priority=778"},
			"line 3 gives the tenant of line 1 another priority"},
		{"unnamed tenant with two priorities", []string{"k1", key + " priority=777"}, "line 2 gives the tenant of line 1 another priority"},
		{"key with two tenants", []string{key + " tenant=team", "k2", key + " tenant=other-team"},
			"line 3 gives the key of line 1 another tenant or priority"},
		{"key with two priorities", []string{key, key + " priority=777"}, "line 2 gives the key of line 1 another tenant or priority"},
		{"line too long", []string{key + " tenant=team " + strings.Repeat("x", apikeys.MaxKeyLength+1-len(key+" tenant=team "))}, "line 1 is longer than"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			k, err := apikeys.Parse([]byte(strings.Join(tt.lines, "\n") + "\n"))
			if k != nil || !errors.Is(err, apikeys.ErrInvalidKeys) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse = %v, %v; want ErrInvalidKeys containing %q", k, err, tt.wantErr)
			}
			for _, quoted := range []string{"sekrit", "team", "777", "778", "colour", "red", "more-of-it", "extra", "high", "1001", "\u00e9"} {
				if strings.Contains(err.Error(), quoted) {
					t.Errorf("the error quotes %q: %v", quoted, err)
				}
			}
		})
	}
}

// TestKeysAuthenticate: each of several keys authenticates as its own
// tenant, wherever it sits in the file; a key that matches none is refused
// with the zero tenant; a nil *Keys (authentication off) lets every request
// in as the zero tenant; the zero Keys refuses. Authenticate, like Allow,
// does not allocate.
func TestKeysAuthenticate(t *testing.T) {
	k, err := apikeys.Parse([]byte("key-a tenant=alpha priority=5\nkey-b tenant=beta\nkey-c priority=-2\nkey-d tenant=alpha priority=5\nkey-e tenant=eps priority=1000\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]admission.Tenant{
		"key-a": {Name: "alpha", Priority: 5},
		"key-b": {Name: "beta"},
		"key-c": {Priority: -2},
		"key-d": {Name: "alpha", Priority: 5},
		"key-e": {Name: "eps", Priority: 1000},
	}
	for key, tenant := range want {
		if got, ok := authenticate(k, key); !ok || got != tenant {
			t.Errorf("Authenticate(%s) = %+v, %v; want %+v", key, got, ok, tenant)
		}
		if !apikeystest.Allows(k, key) {
			t.Errorf("Allow(%s) = false", key)
		}
	}
	if got, ok := authenticate(k, "key-f"); ok || got != (admission.Tenant{}) {
		t.Errorf("an unknown key: %+v, %v", got, ok)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	var open *apikeys.Keys
	if got, ok := open.Authenticate(r); !ok || got != (admission.Tenant{}) {
		t.Errorf("nil *apikeys.Keys: %+v, %v; want the zero tenant, allowed", got, ok)
	}
	if _, ok := (&apikeys.Keys{}).Authenticate(r); ok {
		t.Error("the zero Keys authenticated a request")
	}
	r.Header.Set("Authorization", "Bearer key-e")
	if n := testing.AllocsPerRun(100, func() { k.Authenticate(r) }); n != 0 {
		t.Fatalf("Authenticate allocates %v times per call", n)
	}
}

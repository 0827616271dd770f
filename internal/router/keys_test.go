package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/admission"
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
		{desc: "too long", data: strings.Repeat("k", MaxKeyLength+1), wantErr: "longer than"},
		{desc: "too many", data: strings.Repeat("k\n", MaxKeys+1), wantErr: "more than"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			k, err := ParseKeys([]byte(tt.data))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidKeys) || !strings.Contains(err.Error(), tt.wantErr) {
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
	k, _ := ParseKeys([]byte("alpha\nbeta\n"))
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
	var open *Keys
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
	if k, err := LoadKeys(good); err != nil || k.Len() != 1 {
		t.Fatalf("LoadKeys = %v, %v", k, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("secret with-space\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadKeys(bad)
	if !errors.Is(err, ErrInvalidKeys) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want ErrInvalidKeys naming the file", err)
	}
	if strings.Contains(strings.ReplaceAll(err.Error(), bad, ""), "secret") {
		t.Fatalf("the error quotes the key: %v", err)
	}
	if _, err := LoadKeys(filepath.Join(dir, "missing")); !errors.Is(err, ErrInvalidKeys) {
		t.Fatalf("missing file: %v", err)
	}
}

// BenchmarkKeysAllow measures the key check of every request: a matching
// 51-byte key among two. It must not allocate.
func BenchmarkKeysAllow(b *testing.B) {
	k, err := ParseKeys([]byte("sk-" + strings.Repeat("a", 48) + "\nsk-" + strings.Repeat("b", 48) + "\n"))
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
	k, _ := ParseKeys([]byte("alpha\n"))
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	r.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 100))
	if n := testing.AllocsPerRun(100, func() { k.Allow(r) }); n != 0 {
		t.Fatalf("Allow allocates %v times per call", n)
	}
	r.Header.Set("Authorization", "Bearer "+strings.Repeat("x", MaxKeyLength+1))
	if k.Allow(r) {
		t.Fatal("a token longer than any key was allowed")
	}
	if (&Keys{}).Allow(r) {
		t.Fatal("the zero Keys allowed a request")
	}
}

// secretDir lays out a key file the way the kubelet mounts a Secret: the
// file is a symbolic link through "..data", itself a link to a timestamped
// directory, and an update writes a new directory and renames a new
// "..data_tmp" link over "..data" (one atomic rename).
type secretDir struct {
	t    *testing.T
	dir  string
	gen  int
	last string
}

// newSecretDir returns a Secret mount whose "keys" file holds content.
func newSecretDir(t *testing.T, content string) *secretDir {
	t.Helper()
	d := &secretDir{t: t, dir: t.TempDir()}
	d.update(map[string]string{"keys": content})
	if err := os.Symlink(filepath.Join("..data", "keys"), d.path()); err != nil {
		t.Fatal(err)
	}
	return d
}

// path is the file the router is given.
func (d *secretDir) path() string { return filepath.Join(d.dir, "keys") }

// update projects a new version of the Secret, as the kubelet does.
func (d *secretDir) update(files map[string]string) {
	d.t.Helper()
	d.gen++
	version := fmt.Sprintf("..2026_12_04_08_00_00.%d", d.gen)
	if err := os.Mkdir(filepath.Join(d.dir, version), 0o700); err != nil {
		d.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d.dir, version, name), []byte(content), 0o600); err != nil {
			d.t.Fatal(err)
		}
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
	if d.last != "" {
		if err := os.RemoveAll(filepath.Join(d.dir, d.last)); err != nil {
			d.t.Fatal(err)
		}
	}
	d.last = version
}

// keyWatchHarness runs a KeyWatch on a fake clock and steps it one read
// at a time.
type keyWatchHarness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	polled  chan struct{}
	reports chan KeyReload
	stopped chan error
}

func startKeyWatch(t *testing.T, path string, k *Keys) *keyWatchHarness {
	t.Helper()
	h := &keyWatchHarness{t: t, clock: clocktesting.NewFakeClock(time.Now()), polled: make(chan struct{}),
		reports: make(chan KeyReload, 16), stopped: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	w := KeyWatch{Path: path, Keys: k, Clock: h.clock, Report: func(r KeyReload) { h.reports <- r },
		afterPoll: func() { h.polled <- struct{}{} }}
	go func() { h.stopped <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.stopped:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(failSafe):
			t.Error("the key watch did not stop with its context")
		}
	})
	return h
}

// step lets one interval pass and waits for the read it triggers. The
// ticker is created by Run's goroutine, so the first step waits for it.
func (h *keyWatchHarness) step() {
	h.t.Helper()
	deadline := time.Now().Add(failSafe)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("the key watch never started its ticker")
		}
		runtime.Gosched()
	}
	h.clock.Step(DefaultKeyPollInterval)
	select {
	case <-h.polled:
	case <-time.After(failSafe):
		h.t.Fatal("no read after an interval")
	}
}

// report returns the next report, or fails when there is none.
func (h *keyWatchHarness) report() KeyReload {
	h.t.Helper()
	select {
	case r := <-h.reports:
		return r
	default:
		h.t.Fatal("no report")
		return KeyReload{}
	}
}

// noReport fails when a report is pending.
func (h *keyWatchHarness) noReport() {
	h.t.Helper()
	select {
	case r := <-h.reports:
		h.t.Fatalf("unexpected report %+v", r)
	default:
	}
}

// allows reports whether k allows key.
func allows(k *Keys, key string) bool {
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	r.Header.Set("Authorization", "Bearer "+key)
	return k.Allow(r)
}

// maxRotationChecks bounds the client loop of TestKeyRotation: enough
// requests to span the swap many times over on a slow machine.
const maxRotationChecks = 200_000

// TestKeyRotation rotates the API key by the kubelet's symbolic-link swap
// while a client keeps calling the router with the old key, then the new
// one: at no moment are both refused, the old key works until the new set
// is loaded (two equal reads), the new one from then on.
func TestKeyRotation(t *testing.T) {
	secret := newSecretDir(t, "old-key\n")
	k, err := LoadKeys(secret.path())
	if err != nil {
		t.Fatal(err)
	}
	rt := New(Options{Keys: k})
	defer rt.Close()
	front := httptest.NewServer(rt)
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{}}
	status := func(key string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, front.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	// The client: each round tries the old key, then the new one. Once the
	// old one is refused the swap has happened, so the new one must work.
	stop := make(chan struct{})
	sawOld, sawNew := make(chan struct{}), make(chan struct{})
	type result struct{ checks, neither int }
	done := make(chan result, 1)
	go func() {
		var res result
		oldSeen, newSeen := false, false
		for ; res.checks < maxRotationChecks; res.checks++ {
			select {
			case <-stop:
				done <- res
				return
			default:
			}
			switch {
			case status("old-key") == http.StatusOK:
				if !oldSeen {
					oldSeen = true
					close(sawOld)
				}
			case status("new-key") == http.StatusOK:
				if !newSeen {
					newSeen = true
					close(sawNew)
				}
			default:
				res.neither++
			}
		}
		done <- res
	}()
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(failSafe):
			t.Fatalf("the client never saw %s", what)
		}
	}

	h := startKeyWatch(t, secret.path(), k)
	wait(sawOld, "the old key accepted")
	h.step() // unchanged file: nothing to do.
	h.noReport()

	secret.update(map[string]string{"keys": "new-key\n"})
	h.step() // first read of the new content: not served yet.
	h.noReport()
	if !allows(k, "old-key") || allows(k, "new-key") {
		t.Fatal("the new set was served after one read")
	}
	h.step() // second, equal read: served.
	if r := h.report(); r.Err != nil || r.Keys != 1 {
		t.Fatalf("report = %+v", r)
	}
	if allows(k, "old-key") || !allows(k, "new-key") {
		t.Fatal("the new set is not served after two equal reads")
	}
	wait(sawNew, "the new key accepted")
	close(stop)
	select {
	case res := <-done:
		if res.neither != 0 {
			t.Fatalf("%d of %d rounds had neither key accepted", res.neither, res.checks)
		}
	case <-time.After(failSafe):
		t.Fatal("the client loop did not stop")
	}
}

// TestKeyRotationKeepsOldSet: a file that is absent, empty, invalid or
// still being written keeps the served set; each failure is reported once,
// without key material.
func TestKeyRotationKeepsOldSet(t *testing.T) {
	for _, tt := range []struct {
		desc    string
		files   map[string]string
		wantErr string
	}{
		{desc: "empty", files: map[string]string{"keys": ""}, wantErr: "no key"},
		{desc: "comments only", files: map[string]string{"keys": "# rotated-key-soon\n"}, wantErr: "no key"},
		{desc: "invalid", files: map[string]string{"keys": "rotated key\n"}, wantErr: "contains a space"},
		{desc: "invalid priority", files: map[string]string{"keys": "rotated-key tenant=rotated priority=5000\n"}, wantErr: "priority is not an integer"},
		{desc: "absent", files: map[string]string{"other": "rotated-key\n"}, wantErr: "cannot be opened"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			secret := newSecretDir(t, "old-key\n")
			k, err := LoadKeys(secret.path())
			if err != nil {
				t.Fatal(err)
			}
			h := startKeyWatch(t, secret.path(), k)
			secret.update(tt.files)
			h.step()
			r := h.report()
			if !errors.Is(r.Err, ErrInvalidKeys) || !strings.Contains(r.Err.Error(), tt.wantErr) || r.Keys != 1 {
				t.Fatalf("report = %+v, want ErrInvalidKeys (%s) with the old key kept", r, tt.wantErr)
			}
			if strings.Contains(r.Err.Error(), "rotated") || strings.Contains(r.Err.Error(), "old-key") || strings.Contains(r.Err.Error(), "5000") {
				t.Fatalf("the error quotes key material: %v", r.Err)
			}
			h.step() // the same failure again: not reported twice.
			h.noReport()
			if !allows(k, "old-key") || k.Len() != 1 {
				t.Fatal("a bad file replaced the served set")
			}
			// Fixed: served after two equal reads.
			secret.update(map[string]string{"keys": "new-key\n"})
			h.step()
			h.step()
			if r := h.report(); r.Err != nil || !allows(k, "new-key") || allows(k, "old-key") {
				t.Fatalf("after the fix: %+v", r)
			}
		})
	}
}

// TestKeyRotationInPlaceWrite: a file rewritten in place is served only
// once two consecutive reads agree, so a half-written key is never served.
func TestKeyRotationInPlaceWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("old-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	h := startKeyWatch(t, path, k)
	if err := os.WriteFile(path, []byte("new-k"), 0o600); err != nil { // half written.
		t.Fatal(err)
	}
	h.step()
	if err := os.WriteFile(path, []byte("new-key\n"), 0o600); err != nil { // complete.
		t.Fatal(err)
	}
	h.step()
	h.noReport()
	if allows(k, "new-k") || !allows(k, "old-key") {
		t.Fatal("a content read once was served")
	}
	h.step()
	if r := h.report(); r.Err != nil || !allows(k, "new-key") || allows(k, "new-k") {
		t.Fatalf("report %+v; the complete file is not served", r)
	}
}

func TestKeyWatchMisconfigured(t *testing.T) {
	for _, w := range []KeyWatch{
		{Path: "keys"},
		{Path: "keys", Keys: &Keys{}, Interval: time.Millisecond},
		{Path: "keys", Keys: &Keys{}, Interval: time.Hour},
	} {
		if err := w.Run(context.Background()); !errors.Is(err, errKeyWatch) {
			t.Errorf("%+v: Run = %v, want errKeyWatch", w, err)
		}
	}
}

// authenticate returns what k.Authenticate says of a request presenting
// key.
func authenticate(k *Keys, key string) (admission.Tenant, bool) {
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
			k, err := ParseKeys([]byte(tt.data))
			if err != nil || k.Len() != len(tt.keys) {
				t.Fatalf("ParseKeys = %v keys, %v; want %d", k.Len(), err, len(tt.keys))
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
	long := strings.Repeat("a", MaxTenantNameLength)
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
	k, err := ParseKeys([]byte(data))
	if err != nil || k.Len() != 8 {
		t.Fatalf("ParseKeys = %v keys, %v", k.Len(), err)
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
		{"tenant too long", []string{key + " tenant=" + strings.Repeat("t", MaxTenantNameLength+1)}, "line 1: the tenant is not"},
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
		{"line too long", []string{key + " tenant=team " + strings.Repeat("x", MaxKeyLength+1-len(key+" tenant=team "))}, "line 1 is longer than"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			k, err := ParseKeys([]byte(strings.Join(tt.lines, "\n") + "\n"))
			if k != nil || !errors.Is(err, ErrInvalidKeys) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseKeys = %v, %v; want ErrInvalidKeys containing %q", k, err, tt.wantErr)
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
	k, err := ParseKeys([]byte("key-a tenant=alpha priority=5\nkey-b tenant=beta\nkey-c priority=-2\nkey-d tenant=alpha priority=5\nkey-e tenant=eps priority=1000\n"))
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
		if !allows(k, key) {
			t.Errorf("Allow(%s) = false", key)
		}
	}
	if got, ok := authenticate(k, "key-f"); ok || got != (admission.Tenant{}) {
		t.Errorf("an unknown key: %+v, %v", got, ok)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil) //nolint:noctx // Never sent.
	var open *Keys
	if got, ok := open.Authenticate(r); !ok || got != (admission.Tenant{}) {
		t.Errorf("nil *Keys: %+v, %v; want the zero tenant, allowed", got, ok)
	}
	if _, ok := (&Keys{}).Authenticate(r); ok {
		t.Error("the zero Keys authenticated a request")
	}
	r.Header.Set("Authorization", "Bearer key-e")
	if n := testing.AllocsPerRun(100, func() { k.Authenticate(r) }); n != 0 {
		t.Fatalf("Authenticate allocates %v times per call", n)
	}
}

// TestKeyReloadServesNewPriority: a key file whose priority (or tenant)
// changes is served with the new attributes once two reads agree, like
// any other change; until then the old ones stay.
func TestKeyReloadServesNewPriority(t *testing.T) {
	secret := newSecretDir(t, "the-key tenant=acme priority=1\n")
	k, err := LoadKeys(secret.path())
	if err != nil {
		t.Fatal(err)
	}
	h := startKeyWatch(t, secret.path(), k)
	secret.update(map[string]string{"keys": "the-key tenant=acme priority=7\n"})
	h.step()
	h.noReport()
	if got, ok := authenticate(k, "the-key"); !ok || got.Priority != 1 {
		t.Fatalf("after one read: %+v, %v; want the old priority", got, ok)
	}
	h.step()
	if r := h.report(); r.Err != nil || r.Keys != 1 {
		t.Fatalf("report = %+v", r)
	}
	if got, ok := authenticate(k, "the-key"); !ok || got != (admission.Tenant{Name: "acme", Priority: 7}) {
		t.Fatalf("after two reads: %+v, %v; want acme at 7", got, ok)
	}
	secret.update(map[string]string{"keys": "the-key tenant=batch priority=7\n"})
	h.step()
	h.step()
	if r := h.report(); r.Err != nil {
		t.Fatalf("report = %+v", r)
	}
	if got, ok := authenticate(k, "the-key"); !ok || got != (admission.Tenant{Name: "batch", Priority: 7}) {
		t.Fatalf("after the tenant changed: %+v, %v; want batch at 7", got, ok)
	}
}

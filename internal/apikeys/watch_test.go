package apikeys_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/apikeys/apikeystest"
)

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
			secret := apikeystest.NewSecretDir(t, "old-key\n")
			k, err := apikeys.Load(secret.Path())
			if err != nil {
				t.Fatal(err)
			}
			h := apikeystest.StartWatch(t, secret.Path(), k)
			secret.Update(tt.files)
			h.Step()
			r := h.Report()
			if !errors.Is(r.Err, apikeys.ErrInvalidKeys) || !strings.Contains(r.Err.Error(), tt.wantErr) || r.Keys != 1 {
				t.Fatalf("report = %+v, want apikeys.ErrInvalidKeys (%s) with the old key kept", r, tt.wantErr)
			}
			if strings.Contains(r.Err.Error(), "rotated") || strings.Contains(r.Err.Error(), "old-key") || strings.Contains(r.Err.Error(), "5000") {
				t.Fatalf("the error quotes key material: %v", r.Err)
			}
			h.Step() // the same failure again: not reported twice.
			h.NoReport()
			if !apikeystest.Allows(k, "old-key") || k.Len() != 1 {
				t.Fatal("a bad file replaced the served set")
			}
			// Fixed: served after two equal reads.
			secret.Update(map[string]string{"keys": "new-key\n"})
			h.Step()
			h.Step()
			if r := h.Report(); r.Err != nil || !apikeystest.Allows(k, "new-key") || apikeystest.Allows(k, "old-key") {
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
	k, err := apikeys.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h := apikeystest.StartWatch(t, path, k)
	if err := os.WriteFile(path, []byte("new-k"), 0o600); err != nil { // half written.
		t.Fatal(err)
	}
	h.Step()
	if err := os.WriteFile(path, []byte("new-key\n"), 0o600); err != nil { // complete.
		t.Fatal(err)
	}
	h.Step()
	h.NoReport()
	if apikeystest.Allows(k, "new-k") || !apikeystest.Allows(k, "old-key") {
		t.Fatal("a content read once was served")
	}
	h.Step()
	if r := h.Report(); r.Err != nil || !apikeystest.Allows(k, "new-key") || apikeystest.Allows(k, "new-k") {
		t.Fatalf("report %+v; the complete file is not served", r)
	}
}

func TestKeyWatchMisconfigured(t *testing.T) {
	for _, w := range []apikeys.Watch{
		{Path: "keys"},
		{Path: "keys", Keys: &apikeys.Keys{}, Interval: time.Millisecond},
		{Path: "keys", Keys: &apikeys.Keys{}, Interval: time.Hour},
	} {
		if err := w.Run(context.Background()); !errors.Is(err, apikeys.ErrWatch) {
			t.Errorf("%+v: Run = %v, want ErrWatch", w, err)
		}
	}
}

// TestKeyReloadServesNewPriority: a key file whose priority (or tenant)
// changes is served with the new attributes once two reads agree, like
// any other change; until then the old ones stay.
func TestKeyReloadServesNewPriority(t *testing.T) {
	secret := apikeystest.NewSecretDir(t, "the-key tenant=acme priority=1\n")
	k, err := apikeys.Load(secret.Path())
	if err != nil {
		t.Fatal(err)
	}
	h := apikeystest.StartWatch(t, secret.Path(), k)
	secret.Update(map[string]string{"keys": "the-key tenant=acme priority=7\n"})
	h.Step()
	h.NoReport()
	if got, ok := authenticate(k, "the-key"); !ok || got.Priority != 1 {
		t.Fatalf("after one read: %+v, %v; want the old priority", got, ok)
	}
	h.Step()
	if r := h.Report(); r.Err != nil || r.Keys != 1 {
		t.Fatalf("report = %+v", r)
	}
	if got, ok := authenticate(k, "the-key"); !ok || got != (admission.Tenant{Name: "acme", Priority: 7}) {
		t.Fatalf("after two reads: %+v, %v; want acme at 7", got, ok)
	}
	secret.Update(map[string]string{"keys": "the-key tenant=batch priority=7\n"})
	h.Step()
	h.Step()
	if r := h.Report(); r.Err != nil {
		t.Fatalf("report = %+v", r)
	}
	if got, ok := authenticate(k, "the-key"); !ok || got != (admission.Tenant{Name: "batch", Priority: 7}) {
		t.Fatalf("after the tenant changed: %+v, %v; want batch at 7", got, ok)
	}
}

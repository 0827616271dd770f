package router

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

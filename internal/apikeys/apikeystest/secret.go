package apikeystest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SecretDir lays out a key file the way the kubelet mounts a Secret: the
// file is a symbolic link through "..data", itself a link to a timestamped
// directory, and an update writes a new directory and renames a new
// "..data_tmp" link over "..data" (one atomic rename).
type SecretDir struct {
	t    testing.TB
	dir  string
	gen  int
	last string
}

// NewSecretDir returns a Secret mount, in a temporary directory of t, whose
// "keys" file holds content.
func NewSecretDir(t testing.TB, content string) *SecretDir {
	t.Helper()
	d := &SecretDir{t: t, dir: t.TempDir()}
	d.Update(map[string]string{"keys": content})
	if err := os.Symlink(filepath.Join("..data", "keys"), d.Path()); err != nil {
		t.Fatal(err)
	}
	return d
}

// Path is the key file a router is given.
func (d *SecretDir) Path() string { return filepath.Join(d.dir, "keys") }

// Update projects a new version of the Secret, holding files (name to
// content), as the kubelet does.
func (d *SecretDir) Update(files map[string]string) {
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

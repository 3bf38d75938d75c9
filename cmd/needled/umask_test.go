package main

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestUmask: needled started under the usual umask 022 leaves no file in
// its data dir that others may read. Badger's files (its memtable and value
// log hold task payloads in clear) were 0644 before needled set its umask
// to 0077; --init opens Badger as a start does, without serving.
func TestUmask(t *testing.T) {
	if testing.Short() {
		t.Skip("builds needled")
	}
	bin := buildNeedled(t)
	dir := filepath.Join(t.TempDir(), "data")
	out, err := exec.Command("/bin/sh", "-c", `umask 022 && exec "$0" "$@"`, bin,
		"--init", "--data", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--partitions", "4").CombinedOutput()
	if err != nil {
		t.Fatalf("needled --init: %v\n%s", err, out)
	}
	badger := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is mode %v: others may read or enter it", path, info.Mode().Perm())
		}
		if m, _ := filepath.Match("*.vlog", d.Name()); m || d.Name() == "MANIFEST" {
			badger++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if badger == 0 {
		t.Fatalf("no Badger file (MANIFEST, *.vlog) in %s: the test checked none", dir)
	}
}

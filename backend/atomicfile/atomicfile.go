// Package atomicfile replaces files in one rename, for the keys,
// certificates and passwords provgate writes to disk.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data and mode in one rename: readers and a
// crash never see a half-written file, and an old file's looser mode is
// not inherited.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

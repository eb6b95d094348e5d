// Package storage gives the engine one file system API in both worlds,
// built on hackpadfs: natively an OS directory (hackpadfs/os), in the
// browser the Origin Private File System (package storage/opfs).
//
// Paths are always slash-separated and relative to the FS root, as in
// io/fs (fs.ValidPath). Callers use the FS interface and hackpadfs helpers
// (hackpadfs.ReadFile, WriteFullFile, ...) and never os.* directly, so the
// model cache, the downloader (storage/download) and the loaders run
// unchanged in a browser Worker.
//
// Browser caveat: OPFS file I/O needs sync access handles, which exist only
// inside a dedicated Worker; the engine runs there. See storage/opfs.
package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hack-pad/hackpadfs"
	osfs "github.com/hack-pad/hackpadfs/os"
)

// FS is what the engine needs from a file system. Both OS directories and
// OPFS implement it.
type FS interface {
	hackpadfs.OpenFileFS
	hackpadfs.MkdirFS
	hackpadfs.MkdirAllFS
	hackpadfs.RemoveFS
	hackpadfs.RemoveAllFS
	hackpadfs.RenameFS
	hackpadfs.StatFS
	hackpadfs.ReadDirFS
}

// CacheEnv names the environment variable with which the CLI overrides the
// native cache directory (passed to CacheDir; this package reads no
// environment).
const CacheEnv = "CORTIQ_CACHE"

// CacheDir is the native model cache directory (natively; the browser's
// cache is OPFS, see Default): dir when it is not empty
// (the CLI passes $CORTIQ_CACHE, see CacheEnv), else <os.UserCacheDir>/cortiq.
// It is the one definition of where cortiq caches; the package reads no
// environment itself.
func CacheDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("storage: no cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(base, "cortiq"), nil
}

// Dir returns an FS rooted at the OS directory dir, creating it if needed.
func Dir(dir string) (FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	root := osfs.NewFS()
	vol := filepath.VolumeName(abs)
	if vol != "" {
		sub, err := root.SubVolume(vol)
		if err != nil {
			return nil, fmt.Errorf("storage: %s: %w", dir, err)
		}
		root = sub.(*osfs.FS)
	}
	rel := strings.Trim(filepath.ToSlash(abs[len(vol):]), "/")
	if rel == "" {
		return root, nil
	}
	sub, err := root.Sub(rel)
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", dir, err)
	}
	return sub.(*osfs.FS), nil
}

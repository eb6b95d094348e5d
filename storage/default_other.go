//go:build !js

package storage

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir is the native model cache directory: $CORTIQ_CACHE if set,
// else <os.UserCacheDir>/cortiq.
func DefaultDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("storage: no cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(base, "cortiq"), nil
}

// Default returns the engine's model cache: natively DefaultDir, in the
// browser the OPFS directory "cortiq".
func Default() (FS, error) {
	dir, err := DefaultDir()
	if err != nil {
		return nil, err
	}
	return Dir(dir)
}

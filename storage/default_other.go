//go:build !js

package storage

// DefaultDir is CacheDir(""): <os.UserCacheDir>/cortiq.
func DefaultDir() (string, error) { return CacheDir("") }

// Default returns the engine's model cache: natively DefaultDir, in the
// browser the OPFS directory "cortiq".
func Default() (FS, error) {
	dir, err := DefaultDir()
	if err != nil {
		return nil, err
	}
	return Dir(dir)
}

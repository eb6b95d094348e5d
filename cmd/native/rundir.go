package main

import (
	"os"
	"path/filepath"
	"runtime"
)

// privateRuntimeDir keeps the Vulkan stack quiet on machines without a
// desktop session. When wgpu enumerates Vulkan adapters, libwayland-client
// (loaded by the loader and Mesa's window-system code) prints "error:
// XDG_RUNTIME_DIR is invalid or not set in the environment." if the
// variable is not an absolute path — a line per probe, on every command
// that touches the GPU, though cortiq never presents to a display. When
// XDG_RUNTIME_DIR is unset or not an absolute directory, it is pointed at
// a private empty directory (mode 0700, as the XDG base-directory spec
// asks) for the life of the process; the returned function removes it. A
// valid XDG_RUNTIME_DIR is left alone and nothing is filtered from stderr,
// so the loader's real errors still show.
func privateRuntimeDir() (cleanup func()) {
	nothing := func() {}
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" {
		return nothing
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return nothing
		}
	}
	d, err := os.MkdirTemp("", "cortiq-runtime-")
	if err != nil {
		return nothing
	}
	if err := os.Setenv("XDG_RUNTIME_DIR", d); err != nil {
		os.Remove(d)
		return nothing
	}
	return func() { os.RemoveAll(d) }
}

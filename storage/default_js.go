//go:build js

package storage

import "github.com/cortiq/cortiq/storage/opfs"

// Default returns the engine's model cache: natively DefaultDir, in the
// browser the OPFS directory "cortiq". In the browser it must be called
// from a goroutine of a dedicated Worker, not from a js.Func callback.
func Default() (FS, error) {
	return opfs.New("cortiq")
}

//go:build js

package opfs

import (
	"errors"
	"syscall/js"
	"testing"
)

// TestMainThreadNoSyncAccess documents the Worker-only contract: on a page's
// main thread (e.g. under wasmbrowsertest) directories work but opening a
// file fails with ErrNoSyncAccess.
func TestMainThreadNoSyncAccess(t *testing.T) {
	if js.Global().Get("WorkerGlobalScope").Type() == js.TypeFunction {
		t.Skip("opfs: running in a Worker; this test is for the main thread")
	}
	fsys, err := New("mainthread")
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir("d", 0o777); err != nil {
		t.Fatalf("Mkdir on the main thread: %v", err)
	}
	_, err = fsys.Create("d/f")
	if !errors.Is(err, ErrNoSyncAccess) {
		t.Fatalf("Create on the main thread = %v, want ErrNoSyncAccess", err)
	}
	if _, err := fsys.Stat("d/f"); err == nil {
		t.Error("the failed Create left an empty file behind")
	}
	t.Logf("as documented: %v", err)
}

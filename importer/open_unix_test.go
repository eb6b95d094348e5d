//go:build unix

package importer

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpenRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo %s: %v", fifo, err)
	}
	// Without the check this blocks forever in open(2).
	_, err := Open(context.Background(), fifo)
	if err == nil || !strings.Contains(err.Error(), fifo+": a named pipe (FIFO), not a regular file") {
		t.Fatalf("Open(FIFO) = %v", err)
	}
	if _, err := OpenCached(context.Background(), fifo, t.TempDir()); err == nil {
		t.Fatal("OpenCached(FIFO) succeeded")
	}
	// A FIFO config.json in a directory is refused too.
	hf := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(hf, "config.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), hf); !errors.Is(err, ErrNotModel) {
		t.Fatalf("Open(dir with FIFO config.json) = %v", err)
	}
	if _, err := FromHF(hf); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("FromHF(dir with FIFO config.json) = %v", err)
	}
}

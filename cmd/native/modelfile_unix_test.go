//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO as the model path is refused at once (info and run used to block
// forever opening it).
func TestCLIFIFOModel(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo %s: %v", fifo, err)
	}
	want := fifo + ": a named pipe (FIFO), not a regular file"
	for _, args := range [][]string{{"info"}, {"run", "-p", "a", "-n", "1"}, {"tokenize"}} {
		stderr := cortiqFails(t, append(args, "-m", fifo)...)
		if !strings.Contains(stderr, want) {
			t.Errorf("cortiq %s -m FIFO: stderr %q, want %q", args[0], stderr, want)
		}
	}
}

// So is a FIFO where tokenize expects a tokenizer.json.
func TestCLIFIFOTokenizer(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo %s: %v", fifo, err)
	}
	if stderr := cortiqFails(t, "tokenize", "-m", fifo); !strings.Contains(stderr, fifo+": a named pipe (FIFO), not a regular file") {
		t.Errorf("stderr %q", stderr)
	}
}

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/gguf"
)

// TestInfoCodecs: `cortiq info` prints, per codec, the tensor count and the
// exact bytes of a file, here a q3_K_M-like mix of a 64-wide shape (so
// llama.cpp's fallbacks for rows not a multiple of 256 appear too).
func TestInfoCodecs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	cortiq(t, nil, "synth", "--shape", "tiny", "--quant", "q3_K_M", "-o", path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	count, bytes := map[string]int{}, map[string]int64{}
	for _, ti := range f.Tensors {
		c, ok := ti.Type.Codec()
		if !ok {
			t.Fatalf("%s: type %s", ti.Name, ti.Type)
		}
		count[c.String()]++
		bytes[c.String()] += ti.ByteLen()
	}
	f.Close()
	if len(count) < 3 {
		t.Fatalf("mix holds only %v", count)
	}
	out := cortiq(t, nil, "info", "-m", path)
	for c, n := range count {
		want := fmt.Sprintf("codec       %-7s %4d tensors", c, n)
		if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("(%d bytes)", bytes[c])) {
			t.Errorf("info lacks %q with %d bytes:\n%s", want, bytes[c], out)
		}
	}
}

// TestInfoUnsupportedType: a GGUF with a tensor type no codec holds still
// shows its per-type table, and the import error names the tensor and the
// type.
func TestInfoUnsupportedType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q8k.gguf")
	w, err := gguf.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddMetadata("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorInfo("blk.0.ffn_down.weight", gguf.TypeQ8_K, []uint64{256, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensorData("blk.0.ffn_down.weight", make([]byte, 2*292)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cortiqBin, "info", "-m", path).CombinedOutput()
	if err == nil {
		t.Fatalf("info accepted a Q8_K tensor:\n%s", out)
	}
	for _, want := range []string{"type        Q8_K       1 tensors", "(584 bytes)", `"blk.0.ffn_down.weight": unsupported tensor type Q8_K`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

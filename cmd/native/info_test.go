package main

import (
	"fmt"
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

package tensor

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGGUFVectors checks every GGUF block decoder against values gguf-py's
// reference dequantizer (llama.cpp's quants.py; MXFP4 from ggml's
// definition) produced for random blocks: scripts/gguf_vectors.py wrote
// testdata/vectors. The match must be bit-for-bit.
func TestGGUFVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "vectors", "*.q"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in testdata/vectors: %v", err)
	}
	seen := map[Codec]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".q")
		c, err := ParseCodec(strings.ReplaceAll(strings.ToLower(name), "_k", "_K"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		seen[c] = true
		q, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(strings.TrimSuffix(f, ".q") + ".f32")
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(raw)/4)
		for i := range want {
			want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		got := make([]float32, len(want))
		if err := Dequantize(got, c, q); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		bad := 0
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				if bad < 5 {
					t.Errorf("%s: element %d (block %d): got %g (%#08x), want %g (%#08x)", c, i, i/c.BlockLen(), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d elements differ", c, bad, len(want))
		}
	}
	// The GGUF codecs (seed_test.go tests the seed's).
	for c := Q4_1; c <= MXFP4; c++ {
		if !seen[c] {
			t.Errorf("no test vectors for %s", c)
		}
	}
}

package kernels

import (
	"encoding/binary"
	"os"
	"testing"
)

// PTX is kernels.ptx: the fatbin's compute_80 PTX as text, which the
// binary does not carry; the tests read the kernels' entries and parameter
// types from it (TestPTXFresh ties it to the sources and the fatbin).
var PTX, _ = os.ReadFile("kernels.ptx")

func TestImage(t *testing.T) {
	if len(PTX) == 0 {
		t.Fatal("no kernels.ptx beside the test: run `make cuda-kernels` (needs nvcc)")
	}
	if len(Image) < 4 || binary.LittleEndian.Uint32(Image) != fatbinMagic {
		t.Fatal("the embedded kernels.fatbin is not a fatbin: run `make cuda-kernels` (needs nvcc)")
	}
	for _, c := range []struct {
		image        []byte
		major, minor int
		want         bool
	}{
		{Image, 9, 0, true},
		{Image, 8, 0, false},  // Ampere's cubin does not wait
		{Image, 8, 9, false},  // Ada: the PTX, JIT-compiled
		{Image, 10, 0, false}, // Blackwell: the PTX, JIT-compiled
		{PTX, 9, 0, false},    // PTX text (CORTIQ_CUDA_PTX): compute_80, no waits
		{nil, 9, 0, false},
	} {
		if got := Dependent(c.image, c.major, c.minor); got != c.want {
			t.Errorf("Dependent(%d bytes, sm_%d%d) = %v, want %v", len(c.image), c.major, c.minor, got, c.want)
		}
	}
}

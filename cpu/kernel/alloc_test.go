package kernel

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"weak"

	"github.com/cortiq/cortiq/tensor"
)

// TestDecodeNoAllocs checks that decode's products (MatVec, MatMuls of
// one token) do not allocate per call once warm, with two workers in use
// (testing.AllocsPerRun would force one thread). The runtime may still
// allocate now and then (a parked worker's sudog after a GC emptied the
// caches): the bound is half an allocation per product, where the
// kernels used to take two.
func TestDecodeNoAllocs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(1, 1))
	w := randWeight(t, r, tensor.Q4_0, 2048, 896)
	w2 := randWeight(t, r, tensor.Q8_0, 512, 896)
	x := randX(r, 896)
	y, y2 := make([]float32, 2048), make([]float32, 512)
	forEachImpl(t, func(t *testing.T) {
		run := func() {
			MatVec(y, w, x)
			MatMuls(x, 1, Product{y, w}, Product{y2, w2})
		}
		for range 10 {
			run() // warm the pools and the packed weights
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const calls = 100
		for range calls {
			run()
		}
		runtime.ReadMemStats(&m1)
		if n := m1.Mallocs - m0.Mallocs; n > calls {
			t.Errorf("%d allocations in %d decode steps of two products", n, calls)
		}
	})
}

// TestUnpack checks that packed tiles are built once per tensor and
// dropped by Unpack.
func TestUnpack(t *testing.T) {
	if Detected() < AVX512VNNI {
		t.Skip("no packed tiles below the AVX512VNNI level on this CPU")
	}
	defer SetLevel(SetLevel(AVX512VNNI))
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(3, 3))
	w := randWeight(t, r, tensor.Q4_0, 32, 64)
	x := randX(r, 64)
	y := make([]float32, 32)
	packed := func() bool { _, ok := packCache.Load(weak.Make(w)); return ok }
	MatVec(y, w, x)
	if !packed() {
		t.Fatal("no packed tiles after an Int8 MatVec")
	}
	Unpack(w)
	if packed() {
		t.Fatal("packed tiles left after Unpack")
	}
	y2 := make([]float32, 32)
	MatVec(y2, w, x)
	if !packed() || y2[5] != y[5] {
		t.Fatal("repacking after Unpack changed the result or did not happen")
	}
}

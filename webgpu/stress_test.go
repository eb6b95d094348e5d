package webgpu

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

// TestReadbackUnderGC guards the readback against the binding's MapAsync
// use-after-free (see mapread_native.go): with a collector running flat out
// beside it, every readback must still return the same logits.
func TestReadbackUnderGC(t *testing.T) {
	d := testDevice(t)
	m, ref := loadFixture(t, "llama")
	b, err := New(m, Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var sink [][]byte
		for !stop.Load() {
			runtime.GC()
			for i := 0; i < 1000; i++ {
				sink = append(sink, make([]byte, 8))
			}
			sink = sink[:0]
		}
	}()
	defer func() { stop.Store(true); <-done }()
	var first []float32
	for it := 0; it < 20; it++ {
		s, err := b.NewSession(32)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Forward(ref.InputIDs[:4], false)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = l
		} else if !slices.Equal(l, first) {
			t.Fatalf("iteration %d: logits differ from the first run", it)
		}
	}
}

package webgpu

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// cancelWeights serves weights (whole or in row ranges) and cancels a
// context at the at-th read, counting the reads that follow.
type cancelWeights struct {
	rangeWeights
	at     int64
	cancel context.CancelFunc
	reads  atomic.Int64
	late   atomic.Int64 // reads after the cancel
}

func (w *cancelWeights) read() {
	switch n := w.reads.Add(1); {
	case n == w.at:
		w.cancel()
	case n > w.at:
		w.late.Add(1)
	}
}

func (w *cancelWeights) Tensor(name string) (*tensor.Tensor, bool) {
	w.read()
	return w.rangeWeights.Tensor(name)
}

func (w *cancelWeights) ReadTensorRows(name string, row0, nrows int, dst []byte) error {
	w.read()
	return w.rangeWeights.ReadTensorRows(name, row0, nrows, dst)
}

// TestNewCancelled cancels the upload in the embedding's row ranges, in
// the first layers and in the last one: NewContext returns the context's
// error, stops within the layer it was uploading and releases every buffer
// it made on the caller's device.
func TestNewCancelled(t *testing.T) {
	d := testDevice(t)
	withRowChunk(t, 4<<10) // the embedding goes up in several row ranges
	m, _ := loadFixture(t, "llama")
	mw := m.Weights.(model.MapWeights)

	// How many reads a whole upload makes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := &cancelWeights{rangeWeights: rangeWeights{mw}, at: -1, cancel: cancel}
	mc := *m
	mc.Weights = count
	b, err := NewContext(ctx, &mc, Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	total := count.reads.Load()
	if total < 10 {
		t.Fatalf("a whole upload read %d weights", total)
	}

	for _, at := range []int64{2, total / 3, total - 2} {
		live := d.LiveBuffers()
		ctx, cancel := context.WithCancel(context.Background())
		w := &cancelWeights{rangeWeights: rangeWeights{mw}, at: at, cancel: cancel}
		mc := *m
		mc.Weights = w
		b, err := NewContext(ctx, &mc, Options{Device: d})
		cancel()
		if b != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at read %d of %d: backend %v, err %v; want context.Canceled", at, total, b, err)
		}
		// One layer's weights at most after the cancel: the check is
		// between layers and between row ranges.
		if late := w.late.Load(); late > 16 {
			t.Errorf("cancelled at read %d of %d: %d reads after the cancel", at, total, late)
		}
		if n := d.LiveBuffers(); n != live {
			t.Errorf("cancelled at read %d of %d: %d device buffers left behind", at, total, n-live)
		}
	}

	// A context done before the call allocates nothing.
	live := d.LiveBuffers()
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := NewContext(done, m, Options{Device: d}); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
	if n := d.LiveBuffers(); n != live {
		t.Errorf("done context: %d device buffers left behind", n-live)
	}
}

package main

import (
	"runtime"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// sampleWeights wraps w to sample the heap on every read, keeping
// model.RangeReader visible when w has it: the GPU backend then uploads
// large tensors (the embedding) in row ranges instead of whole.
func sampleWeights(w model.Weights, hs *heapSampler) model.Weights {
	sw := &sampledWeights{Weights: w, hs: hs}
	if rr, ok := w.(model.RangeReader); ok {
		return &sampledRangeWeights{sampledWeights: sw, rr: rr}
	}
	return sw
}

// sampledRangeWeights is sampledWeights for weights read in row ranges.
type sampledRangeWeights struct {
	*sampledWeights
	rr model.RangeReader
}

func (w *sampledRangeWeights) TensorInfo(name string) (tensor.Codec, []int, bool) {
	return w.rr.TensorInfo(name)
}

func (w *sampledRangeWeights) ReadTensorRows(name string, row0, nrows int, dst []byte) error {
	// The previous range's converted copy is garbage once written to the
	// device: collect it rather than let GOGC grow the heap by a multiple
	// of the working set.
	hs := w.hs
	if hs.sample() > hs.live+16<<20 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		hs.live = ms.HeapAlloc
	}
	err := w.rr.ReadTensorRows(name, row0, nrows, dst)
	hs.sample()
	return err
}

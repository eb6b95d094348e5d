package kernel

import (
	"sync/atomic"

	"github.com/cortiq/cortiq/tensor"
)

// Observer sees the activations of every weight product: x holds n rows of
// w.Cols() values, the inputs of MatMul(y, w, x, n) (or of one of MatMuls'
// products). Calibration (package quant: GPTQ's Gram matrices) sets one
// for the length of a run; x must not be retained or modified.
type Observer func(w *tensor.Tensor, x []float32, n int)

var observer atomic.Pointer[Observer]

// SetObserver installs f (nil removes it) and returns the previous one. The
// observer is process-wide: calibration runs alone, and f must be safe for
// concurrent calls when sessions run concurrently.
func SetObserver(f Observer) Observer {
	var old *Observer
	if f == nil {
		old = observer.Swap(nil)
	} else {
		old = observer.Swap(&f)
	}
	if old == nil {
		return nil
	}
	return *old
}

func observe(w *tensor.Tensor, x []float32, n int) {
	if o := observer.Load(); o != nil && n > 0 {
		(*o)(w, x[:n*w.Cols()], n)
	}
}

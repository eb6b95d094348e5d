package importer

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// rangeSource reads bytes of a tensor as its container stores it:
// gguf.File, cmf.File and safetensors.Set all have this method.
type rangeSource interface {
	ReadRange(name string, off int64, dst []byte) error
}

// lazyView says where a canonical tensor's bytes lie in the container: n
// bytes at off into the stored tensor src (a whole tensor, or a row range of
// a fused one).
type lazyView struct {
	src    string
	off, n int64
}

// lazyChecker verifies what lazyWeights read (CMF's checksums).
type lazyChecker interface {
	// whole checks a tensor read whole.
	whole(name string, data []byte) error
	// rows checks bytes read at off into a tensor, in whatever order the
	// rows are asked for.
	rows(name string, off int64, data []byte) error
}

// lazyWeights are the weights of a container nothing is mapped from (the
// browser, a platform without mmap), for GGUF, CMF and Hugging Face
// safetensors alike: each Tensor call reads that tensor (nothing is cached,
// so a caller uploading tensors one at a time holds one at a time), and
// ReadTensorRows (model.RangeReader) reads row ranges, so that a backend
// can load a large tensor in bounded pieces. A tensor without a view (one
// the importer computed: a packed expert bank) is served from memory. A
// failed read or check makes Tensor return false and ReadTensorRows fail;
// Err returns the first such error.
type lazyWeights struct {
	label   string // "gguf: PATH": errors start with it
	src     rangeSource
	headers model.MapWeights // codec and shape; Data only for computed tensors
	views   map[string]lazyView
	check   lazyChecker // nil: nothing to verify

	mu  sync.Mutex
	err error
}

var _ model.RangeReader = (*lazyWeights)(nil)

func (w *lazyWeights) Names() []string { return w.headers.Names() }

func (w *lazyWeights) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// Err returns the first error a Tensor or ReadTensorRows call met.
func (w *lazyWeights) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *lazyWeights) Tensor(name string) (*tensor.Tensor, bool) {
	h, ok := w.headers[name]
	if !ok {
		return nil, false
	}
	v, ok := w.views[name]
	if !ok {
		return h, true
	}
	data := make([]byte, v.n)
	err := w.src.ReadRange(v.src, v.off, data)
	if err == nil && w.check != nil {
		err = w.check.whole(name, data)
	}
	var side []byte
	if err == nil {
		// A codec with a side field stores it after the rows.
		if data, side, err = tensor.SplitStored(h.Codec, h.Shape, data); err != nil {
			err = fmt.Errorf("%s: tensor %q: %w", w.label, name, err)
		}
	}
	if err != nil {
		w.fail(err)
		return nil, false
	}
	return &tensor.Tensor{Name: name, Codec: h.Codec, Shape: slices.Clone(h.Shape), Data: data, Side: side}, true
}

func (w *lazyWeights) TensorInfo(name string) (tensor.Codec, []int, bool) {
	h, ok := w.headers[name]
	if !ok {
		return 0, nil, false
	}
	return h.Codec, slices.Clone(h.Shape), true
}

func (w *lazyWeights) ReadTensorRows(name string, row0, nrows int, dst []byte) error {
	h, ok := w.headers[name]
	if !ok {
		return fmt.Errorf("%s: no tensor %q", w.label, name)
	}
	off, err := rowRange(h.Codec, h.Shape, row0, nrows, len(dst))
	if err != nil {
		return fmt.Errorf("%s: tensor %q: %w", w.label, name, err)
	}
	v, ok := w.views[name]
	if !ok {
		copy(dst, h.Data[off:])
		return nil
	}
	if off+int64(len(dst)) > v.n {
		return fmt.Errorf("%s: tensor %q: rows past its %d bytes", w.label, name, v.n)
	}
	err = w.src.ReadRange(v.src, v.off+off, dst)
	if err == nil && w.check != nil {
		err = w.check.rows(name, off, dst)
	}
	if err != nil {
		w.fail(err)
	}
	return err
}

// verifyAll reads and checks every tensor, as their first use would.
func (w *lazyWeights) verifyAll() error {
	for _, name := range w.Names() {
		if _, ok := w.Tensor(name); !ok {
			return w.Err()
		}
	}
	return nil
}

package importer

import (
	"fmt"
	"slices"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// The lazy weights of unmapped files let a backend read a tensor in row
// ranges (model.RangeReader): the browser uploads its largest tensors
// (the token embedding) a few MiB at a time.
var (
	_ model.RangeReader = (*ggufLazyWeights)(nil)
	_ model.RangeReader = (*cmfLazyWeights)(nil)
)

// rowRange is the byte range of rows [row0, row0+nrows) of a tensor of
// codec c and shape, checked against dst's length.
func rowRange(c tensor.Codec, shape []int, row0, nrows, dst int) (int64, error) {
	t := tensor.Tensor{Shape: shape}
	rb, err := c.RowBytes(t.Cols())
	if err != nil {
		return 0, err
	}
	if row0 < 0 || nrows < 0 || row0 > t.Rows() || nrows > t.Rows()-row0 {
		return 0, fmt.Errorf("rows [%d, %d) outside shape %v", row0, row0+nrows, shape)
	}
	if int64(dst) != int64(nrows)*int64(rb) {
		return 0, fmt.Errorf("%d-byte buffer for %d rows of %d bytes", dst, nrows, rb)
	}
	return int64(row0) * int64(rb), nil
}

func (w *ggufLazyWeights) TensorInfo(name string) (tensor.Codec, []int, bool) {
	h, ok := w.headers[name]
	if !ok {
		return 0, nil, false
	}
	return h.Codec, slices.Clone(h.Shape), true
}

func (w *ggufLazyWeights) ReadTensorRows(name string, row0, nrows int, dst []byte) error {
	h, ok := w.headers[name]
	if !ok {
		return fmt.Errorf("gguf: %s: no tensor %q", w.f.Name, name)
	}
	off, err := rowRange(h.Codec, h.Shape, row0, nrows, len(dst))
	if err != nil {
		return fmt.Errorf("gguf: %s: tensor %q: %w", w.f.Name, name, err)
	}
	v := w.views[name]
	if off+int64(len(dst)) > v.n {
		return fmt.Errorf("gguf: %s: tensor %q: rows past its %d bytes", w.f.Name, name, v.n)
	}
	return w.f.ReadRange(v.src, v.off+off, dst)
}

func (w *cmfLazyWeights) TensorInfo(name string) (tensor.Codec, []int, bool) {
	e, ok := w.f.Entry(name)
	if !ok {
		return 0, nil, false
	}
	return e.Codec, slices.Clone(e.Shape), true
}

// ReadTensorRows reads rows as asked and checks the tensor's checksum: it
// extends a running CRC-32C while the rows come in order from the first,
// and compares it when the last row is read; a read that skips ahead reads
// the whole tensor once to check it instead.
func (w *cmfLazyWeights) ReadTensorRows(name string, row0, nrows int, dst []byte) error {
	e, ok := w.f.Entry(name)
	if !ok {
		return fmt.Errorf("cmf: %s: no tensor %q", w.f.Name, name)
	}
	off, err := rowRange(e.Codec, e.Shape, row0, nrows, len(dst))
	if err != nil {
		return fmt.Errorf("cmf: %s: tensor %q: %w", w.f.Name, name, err)
	}
	if err := w.f.ReadRange(name, off, dst); err != nil {
		w.fail(err)
		return err
	}
	c := w.checks[name]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checked {
		return c.err
	}
	switch end := off + int64(len(dst)); {
	case off == c.next:
		c.crc = cmf.UpdateChecksum(c.crc, dst)
		c.next = end
	case end <= c.next:
		// Rows already folded into the running checksum.
	default:
		c.checked, c.err = true, w.f.VerifyTensor(name)
	}
	if !c.checked && c.next == e.Length {
		c.checked, c.err = true, w.f.CheckSum(name, c.crc)
	}
	if c.err != nil {
		w.fail(c.err)
	}
	return c.err
}

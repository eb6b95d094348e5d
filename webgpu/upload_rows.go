package webgpu

import (
	"context"
	"fmt"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// rowChunkBytes bounds the encoded bytes of one row range read, converted
// and written when a tensor is uploaded from a model.RangeReader: the
// browser reads weights from a file with no mapping, and holding a whole
// 150k-row embedding plus its repacked copy doubled the load's heap peak.
// A variable so tests can force many chunks.
var rowChunkBytes = 4 << 20

// weightInfo returns the named tensor's codec and shape, without reading
// its data when the weights can say so.
func weightInfo(m *model.Model, name string) (tensor.Codec, []int, error) {
	if rr, ok := m.Weights.(model.RangeReader); ok {
		if c, shape, ok := rr.TensorInfo(name); ok {
			return c, shape, nil
		}
		return 0, nil, fmt.Errorf("webgpu: missing tensor %q", name)
	}
	t, ok := m.Weights.Tensor(name)
	if !ok {
		return 0, nil, fmt.Errorf("webgpu: missing tensor %q", name)
	}
	return t.Codec, t.Shape, nil
}

// uploadNamed uploads the named weight, in row ranges when the weights are
// read from a file on demand and the tensor is larger than one range.
func (b *Backend) uploadNamed(ctx context.Context, m *model.Model, name string) (*dweight, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rr, ok := m.Weights.(model.RangeReader); ok {
		c, shape, ok := rr.TensorInfo(name)
		if !ok {
			return nil, fmt.Errorf("webgpu: missing tensor %q", name)
		}
		// A codec with a side field is laid out whole (encodeForDevice).
		if n, err := tensor.ByteLen(c, shape); err == nil && n > int64(rowChunkBytes) && len(shape) >= 2 && !c.HasSide() {
			return b.uploadRows(ctx, rr, name, c, shape)
		}
	}
	t, err := b.tensor(m, name)
	if err != nil {
		return nil, err
	}
	return b.uploadWeight(name, t)
}

// uploadRows uploads a weight a range of rows at a time, producing the
// buffer encodeForDevice would for the whole tensor. A done ctx stops it
// between two ranges, the buffer released.
func (b *Backend) uploadRows(ctx context.Context, rr model.RangeReader, name string, c tensor.Codec, shape []int) (*dweight, error) {
	ht := tensor.Tensor{Name: name, Codec: c, Shape: shape}
	w, err := b.newRowWriter(name, c, ht.Rows(), ht.Cols())
	if err != nil {
		return nil, err
	}
	per := max(1, rowChunkBytes/w.rb)
	for w.misaligned(per) {
		// A range's scale plane (1 or 2 bytes a block for some codecs)
		// must start on a 4-byte boundary: block counts per range that
		// keep it there.
		per++
	}
	raw := make([]byte, min(per, w.rows)*w.rb)
	for r0 := 0; r0 < w.rows; r0 += per {
		n := min(per, w.rows-r0)
		chunk := raw[:n*w.rb]
		if err := ctx.Err(); err != nil {
			w.buf.Release()
			return nil, err
		}
		if err := rr.ReadTensorRows(name, r0, n, chunk); err != nil {
			w.buf.Release()
			return nil, fmt.Errorf("webgpu: %s: %w", name, err)
		}
		if err := w.put(r0, chunk); err != nil {
			w.buf.Release()
			return nil, err
		}
	}
	return w.done(), nil
}

// uploadParts uploads fused tensors (gate and up, q, k and v) one at a
// time into their places in the fused buffer, instead of concatenating
// them and converting the concatenation (two extra copies of the fused
// weight on the host). ok is false when the parts cannot be placed so
// (mixed codecs, or a part starting mid scale word); the caller then
// encodes them together.
func (b *Backend) uploadParts(label string, ts []*tensor.Tensor) (dw *dweight, ok bool, err error) {
	c, cols := ts[0].Codec, ts[0].Cols()
	rows := 0
	for _, t := range ts {
		want, err := tensor.ByteLen(t.Codec, t.Shape)
		if t.Codec != c || t.Cols() != cols || err != nil || want != int64(len(t.Data)) {
			return nil, false, nil
		}
		rows += t.Rows()
	}
	if dc, err := deviceCodec(c); err != nil || cols%4 != 0 || (planar(dc) && cols%shaders.DeviceCodecOf(dc).Elems != 0) {
		return nil, false, nil
	}
	w, err := b.newRowWriter(label, c, rows, cols)
	if err != nil {
		return nil, false, nil
	}
	r0 := 0
	for _, t := range ts {
		if w.misaligned(r0) {
			w.buf.Release()
			return nil, false, nil
		}
		if err := w.put(r0, t.Data); err != nil {
			w.buf.Release()
			return nil, true, err
		}
		r0 += t.Rows()
	}
	return w.done(), true, nil
}

// rowWriter fills a weight's device buffer from ranges of its rows, each
// encoded on its own (rows are independent in every codec): a q8_0/q4_0
// range's quant and scale planes land at its blocks' places in the whole
// tensor's two planes.
type rowWriter struct {
	b          *Backend
	name       string
	c, dc      tensor.Codec
	rows, cols int
	rb         int   // source bytes per row
	drb        int   // device bytes per row (unquantized device codecs)
	bpr        int   // blocks per row (planar device codecs)
	qBytes     int   // quant bytes per block
	sBytes     int   // scale-plane bytes per block
	qlen, size int64 // quant plane and buffer bytes
	buf        *gpu.Buffer
	scratch    []byte
}

func (b *Backend) newRowWriter(name string, c tensor.Codec, rows, cols int) (*rowWriter, error) {
	w := &rowWriter{b: b, name: name, c: c, rows: rows, cols: cols}
	if c.HasSide() {
		// Its side field is laid out with the whole weight (encodeForDevice).
		return nil, fmt.Errorf("webgpu: %s: %s weights are uploaded whole", name, c)
	}
	var err error
	if w.rb, err = c.RowBytes(cols); err != nil {
		return nil, fmt.Errorf("webgpu: %s: %w", name, err)
	}
	if cols%4 != 0 {
		return nil, fmt.Errorf("webgpu: %w: %s has %d columns (kernels need a multiple of 4)", ErrUnsupported, name, cols)
	}
	if w.dc, err = deviceCodec(c); err != nil {
		return nil, err
	}
	if c == tensor.F16 && cols%shaders.ChunkOf(tensor.F16) != 0 {
		w.dc = tensor.F32
	}
	if planar(w.dc) {
		rec := shaders.DeviceCodecOf(w.dc)
		w.qBytes, w.sBytes = rec.QBytes, rec.SBytes
		if cols%rec.Elems != 0 {
			return nil, fmt.Errorf("webgpu: %s has %d columns, not a whole number of %d-element %s blocks", name, cols, rec.Elems, w.dc)
		}
		w.bpr = cols / rec.Elems
		nb := int64(rows) * int64(w.bpr)
		w.qlen = nb * int64(w.qBytes)
		w.size = w.qlen + (nb*int64(w.sBytes)+3)&^3
	} else {
		if w.drb, err = deviceRowBytes(w.dc, cols); err != nil {
			return nil, err
		}
		w.size = int64(rows)*int64(w.drb) + int64(len(shaders.GridTail(w.dc)))
	}
	if w.buf, err = b.dev.NewStorage(name, uint64(w.size)); err != nil {
		return nil, err
	}
	if tail := shaders.GridTail(w.dc); tail != nil {
		// The IQ code book after the blocks (see shaders.GridTail).
		if err := w.write(int64(rows)*int64(w.drb), tail); err != nil {
			w.buf.Release()
			return nil, err
		}
	}
	return w, nil
}

// misaligned reports whether rows from r0 would start a planar codec's
// scale-plane entries mid u32 (1- or 2-byte entries from a block not a
// multiple of 4 or 2).
func (w *rowWriter) misaligned(r0 int) bool {
	return w.sBytes*w.bpr*r0%4 != 0
}

// write writes data at off, submitting when enough is staged.
func (w *rowWriter) write(off int64, data []byte) error {
	d := w.b.dev
	if err := d.Write(w.buf, uint64(off), data); err != nil {
		return fmt.Errorf("webgpu: upload %s: %w", w.name, err)
	}
	if err := d.Staged(len(data)); err != nil {
		return fmt.Errorf("webgpu: upload %s: %w", w.name, err)
	}
	return nil
}

// put encodes rows [r0, r0+len(chunk)/rb) and writes them. With an odd
// block count per row, r0 must be even.
func (w *rowWriter) put(r0 int, chunk []byte) error {
	n := len(chunk) / w.rb
	var data []byte
	var csoff uint32
	var err error
	c, dc := w.c, w.dc
	switch rec := shaders.DeviceCodecOf(dc); {
	case c == dc && rec.Pack != nil:
		// Repacked into one reused buffer: a fresh copy per range would
		// leave a range's worth of garbage behind each time.
		if data, csoff, err = rec.Pack(w.scratch, chunk); err != nil {
			return err
		}
		w.scratch = data
	case c == dc:
		data = chunk
	default:
		ct := &tensor.Tensor{Name: w.name, Codec: c, Shape: []int{n, w.cols}, Data: chunk}
		if data, _, _, _, csoff, err = encodeForDevice([]*tensor.Tensor{ct}); err != nil {
			return err
		}
	}
	if !planar(dc) {
		return w.write(int64(r0)*int64(w.drb), data)
	}
	if w.misaligned(r0) {
		return fmt.Errorf("webgpu: upload %s: rows from %d: scale plane misaligned", w.name, r0)
	}
	b0, kb := int64(r0)*int64(w.bpr), n*w.bpr
	if err := w.write(b0*int64(w.qBytes), data[:kb*w.qBytes]); err != nil {
		return err
	}
	s := int(csoff) * 4
	return w.write(w.qlen+int64(w.sBytes)*b0, data[s:s+(w.sBytes*kb+3)&^3])
}

// done accounts the buffer and returns the weight.
func (w *rowWriter) done() *dweight {
	b := w.b
	b.stats.resident += int64(w.buf.Size())
	b.stats.upload += w.size
	var soff uint32
	if planar(w.dc) {
		soff = uint32(w.qlen / 4)
	} else if shaders.GridTail(w.dc) != nil {
		soff = uint32(int64(w.rows) * int64(w.drb) / 4)
	}
	return &dweight{name: w.name, buf: w.buf, codec: w.dc, rows: w.rows, cols: w.cols, soff: soff, bytes: w.size}
}

// tensorHeader is the named tensor's header (Data nil), for sizing and
// shape checks.
func tensorHeader(m *model.Model, name string) (*tensor.Tensor, error) {
	c, shape, err := weightInfo(m, name)
	if err != nil {
		return nil, err
	}
	return &tensor.Tensor{Name: name, Codec: c, Shape: shape}, nil
}

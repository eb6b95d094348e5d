package webgpu

import (
	"fmt"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// dweight is a projection resident on the device.
type dweight struct {
	name       string
	buf        *gpu.Buffer
	codec      tensor.Codec // the device codec (after any load-time conversion)
	rows, cols int
	soff       uint32 // scale plane offset (u32) for q8_0/q4_0, grid offset for the IQ codecs
	bytes      int64  // device bytes, all read by one full matmul
	// stages, for a weight run as two products (blr: buf nil): y =
	// stages[1]·(stages[0]·x), through the session's blr scratch.
	stages [2]*dweight
}

// release releases w's buffers (its stages' for a two-product weight).
func (w *dweight) release() {
	if w == nil {
		return
	}
	w.buf.Release()
	for _, st := range w.stages {
		st.release()
	}
}

// deviceCodec is the codec a weight of codec c is held in on the device.
// q4_K and q6_K (the two codecs of the common Q4_K_M files) are read
// directly, GGUF's super-blocks kept (q6_K padded to 224 bytes) and decoded
// exactly as the CPU does. bf16 widens to f32 (exact) because f16 cannot
// hold bf16's range.
func deviceCodec(c tensor.Codec) (tensor.Codec, error) {
	if c == tensor.BF16 {
		return tensor.F32, nil
	}
	if shaders.Supported(c) {
		return c, nil
	}
	return 0, fmt.Errorf("webgpu: %w: %s weights", ErrUnsupported, c)
}

// deviceRowBytes is the bytes of one row of cols elements of device codec
// dc: its blocks at the device block size (shaders.DeviceCodec.Block).
func deviceRowBytes(dc tensor.Codec, cols int) (int, error) {
	rb, err := dc.RowBytes(cols)
	d := shaders.DeviceCodecOf(dc)
	if err != nil || d == nil || dc.BlockBytes() == 0 {
		return rb, err
	}
	return rb / dc.BlockBytes() * d.Block, nil
}

// planar reports whether device codec dc is stored as a quant plane then a
// scale plane (shaders.DeviceCodec.Planar).
func planar(dc tensor.Codec) bool {
	d := shaders.DeviceCodecOf(dc)
	return d != nil && d.Planar
}

// deviceBytes is the size of rows x cols elements of codec c on the device.
func deviceBytes(c tensor.Codec, rows, cols int) int64 {
	dc, err := deviceCodec(c)
	if err != nil {
		return 0
	}
	if shaders.Staged(dc) {
		// Two q1 stages of about one bit of factors per weight.
		return deviceBytes(tensor.Q1, rows, cols)
	}
	if dc == tensor.F16 && cols%shaders.ChunkOf(tensor.F16) != 0 {
		dc = tensor.F32
	}
	rb, err := deviceRowBytes(dc, cols)
	if err != nil {
		return 0
	}
	n := int64(rows) * int64(rb)
	if planar(dc) {
		n += 4 // scale plane padding
	}
	if dc.HasSide() {
		// The side field's row table and one matrix's column field.
		n += 4*int64(rows+4) + 4*int64(cols)
	}
	return n + int64(len(shaders.GridTail(dc)))
}

// encodeForDevice converts the concatenated rows of ts into the device
// layout. All ts must share the codec and the column count.
func encodeForDevice(ts []*tensor.Tensor) (data []byte, codec tensor.Codec, rows, cols int, soff uint32, err error) {
	if len(ts) == 0 {
		return nil, 0, 0, 0, 0, fmt.Errorf("webgpu: no tensors")
	}
	c := ts[0].Codec
	cols = ts[0].Cols()
	var raw []byte
	for _, t := range ts {
		if t.Codec != c || t.Cols() != cols {
			return nil, 0, 0, 0, 0, fmt.Errorf("webgpu: %s (%s, %d cols) cannot join %s (%s, %d cols)", t.Name, t.Codec, t.Cols(), ts[0].Name, c, cols)
		}
		want, err := tensor.ByteLen(t.Codec, t.Shape)
		if err != nil || want != int64(len(t.Data)) {
			return nil, 0, 0, 0, 0, fmt.Errorf("webgpu: %s: %d bytes for shape %v (%s)", t.Name, len(t.Data), t.Shape, t.Codec)
		}
		rows += t.Rows()
		if len(ts) == 1 {
			raw = t.Data
		} else {
			raw = append(raw, t.Data...)
		}
	}
	if cols%4 != 0 {
		return nil, 0, 0, 0, 0, fmt.Errorf("webgpu: %w: %s has %d columns (kernels need a multiple of 4)", ErrUnsupported, ts[0].Name, cols)
	}
	codec, err = deviceCodec(c)
	if err != nil {
		return nil, 0, 0, 0, 0, err
	}
	switch {
	case c == tensor.F16 && cols%shaders.ChunkOf(tensor.F16) != 0:
		// The f16 matmul reads 8 elements per load; widen odd widths.
		f := make([]float32, rows*cols)
		if err := tensor.Dequantize(f, tensor.F16, raw); err != nil {
			return nil, 0, 0, 0, 0, err
		}
		return gpu.F32Bytes(f), tensor.F32, rows, cols, 0, nil
	}
	if c == tensor.BF16 {
		f := make([]float32, rows*cols)
		if err := tensor.Dequantize(f, c, raw); err != nil {
			return nil, 0, 0, 0, 0, err
		}
		return gpu.F32Bytes(f), tensor.F32, rows, cols, 0, nil
	}
	d := shaders.DeviceCodecOf(c)
	if d.Pack == nil {
		return raw, c, rows, cols, 0, nil
	}
	data, soff, err = d.Pack(nil, raw)
	if d.Grid != nil && err == nil {
		soff = uint32(len(data) / 4)
		data = append(data, d.Grid...)
	}
	if d.Side != nil && err == nil {
		// The per-tensor side field (q8_2f's column scales) after the
		// blocks, at the kernels' soff.
		soff = uint32(len(data) / 4)
		var tail []byte
		if tail, err = d.Side(soff, ts); err != nil {
			return nil, 0, 0, 0, 0, fmt.Errorf("webgpu: %s: %w", ts[0].Name, err)
		}
		data = append(data, tail...)
	}
	return data, c, rows, cols, soff, err
}

// vectorF32 decodes a 1-D tensor (norm weight, bias) to float32.
func vectorF32(t *tensor.Tensor, n int) ([]float32, error) {
	if t.Elements() != n {
		return nil, fmt.Errorf("webgpu: %s has %d elements, want %d", t.Name, t.Elements(), n)
	}
	out := make([]float32, n)
	if err := tensor.Dequantize(out, t.Codec, t.Data); err != nil {
		return nil, fmt.Errorf("webgpu: %s: %w", t.Name, err)
	}
	return out, nil
}

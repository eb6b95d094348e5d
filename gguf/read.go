package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/cortiq/cortiq/mapfile"
)

// maxNesting bounds arrays of arrays: each level costs only 12 bytes of
// input, and unbounded recursion would overflow the stack.
const maxNesting = 8

// maxAlignment bounds general.alignment; larger values only serve to make
// offsets overflow.
const maxAlignment = 1 << 30

// maxDim bounds each tensor dimension so that shapes fit an int everywhere
// and products of a zero dimension with huge ones stay harmless.
const maxDim = 1 << 40

// Read parses the GGUF header from r, whose length is size; name is used in
// errors. The returned File reads tensor data through r (or aliases r's
// bytes when r holds them: see mapfile.NewBlob); Close does not close r.
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	f, err := parse(r, size, name)
	if err != nil {
		return nil, err
	}
	f.blob = mapfile.NewBlob(r, size)
	return f, nil
}

// decoder reads the header sequentially, tracking the absolute offset so
// that every length can be checked against what is left of the file.
type decoder struct {
	r    *bufio.Reader
	off  int64
	size int64
	name string
	buf  [8]byte
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf: %s: "+format, append([]any{d.name}, args...)...)
}

func (d *decoder) remaining() int64 { return d.size - d.off }

func (d *decoder) read(p []byte, what string) error {
	if int64(len(p)) > d.remaining() {
		return d.errorf("%s at offset %d: file truncated (%d bytes)", what, d.off, d.size)
	}
	if _, err := io.ReadFull(d.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return d.errorf("%s at offset %d: file truncated", what, d.off)
		}
		return d.errorf("%s at offset %d: %w", what, d.off, err)
	}
	d.off += int64(len(p))
	return nil
}

func (d *decoder) u8(what string) (uint8, error) {
	err := d.read(d.buf[:1], what)
	return d.buf[0], err
}

func (d *decoder) u16(what string) (uint16, error) {
	err := d.read(d.buf[:2], what)
	return binary.LittleEndian.Uint16(d.buf[:]), err
}

func (d *decoder) u32(what string) (uint32, error) {
	err := d.read(d.buf[:4], what)
	return binary.LittleEndian.Uint32(d.buf[:]), err
}

func (d *decoder) u64(what string) (uint64, error) {
	err := d.read(d.buf[:8], what)
	return binary.LittleEndian.Uint64(d.buf[:]), err
}

func (d *decoder) str(what string) (string, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", d.errorf("%s at offset %d: length %d beyond end of file (%d bytes)", what, at, n, d.size)
	}
	// Most strings (tokens, keys) fit the read buffer: convert them in
	// place instead of copying through a scratch slice.
	if n <= uint64(d.r.Size()) {
		if p, err := d.r.Peek(int(n)); err == nil {
			s := string(p)
			d.r.Discard(int(n))
			d.off += int64(n)
			return s, nil
		}
	}
	b := make([]byte, n)
	if err := d.read(b, what); err != nil {
		return "", err
	}
	return string(b), nil
}

func parse(r io.ReaderAt, size int64, name string) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: %s: negative size %d", name, size)
	}
	// A large buffer keeps the number of ReadAt calls low when r issues
	// HTTP range requests (the browser); small files get a small one.
	bufSize := int(min(size, 1<<20))
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), max(bufSize, 16)), size: size, name: name}
	var magic [4]byte
	if err := d.read(magic[:], "magic"); err != nil {
		return nil, err
	}
	if string(magic[:]) != Magic {
		return nil, d.errorf("not a GGUF file (magic %q)", magic[:])
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, d.errorf("GGUF version 1 is not supported (convert the file with a current llama.cpp)")
	case version&0xffff == 0 && version != 0:
		return nil, d.errorf("big-endian GGUF (version field %#x) is not supported", version)
	default:
		return nil, d.errorf("unknown GGUF version %d", version)
	}
	f := &File{Name: name, Version: version, Size: size, Alignment: DefaultAlignment}

	nTensors, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// A key-value pair takes at least 13 bytes (key length, type, one byte);
	// a tensor info at least 24 (name length, n_dims, type, offset).
	if nKV > uint64(d.remaining())/13 {
		return nil, d.errorf("metadata count %d does not fit in the file (%d bytes)", nKV, size)
	}
	if nTensors > uint64(d.remaining())/24 {
		return nil, d.errorf("tensor count %d does not fit in the file (%d bytes)", nTensors, size)
	}

	f.Metadata = make(map[string]any, nKV)
	f.Keys = make([]string, 0, nKV)
	for i := range nKV {
		at := d.off
		key, err := d.str(fmt.Sprintf("metadata %d key", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.Metadata[key]; dup {
			return nil, d.errorf("metadata %d at offset %d: duplicate key %q", i, at, key)
		}
		t, err := d.u32(fmt.Sprintf("metadata %q type", key))
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), key, 0)
		if err != nil {
			return nil, err
		}
		f.Metadata[key] = v
		f.Keys = append(f.Keys, key)
	}

	if v, ok := f.Metadata["general.alignment"]; ok {
		a, isInt := toInt(v)
		if !isInt || a <= 0 || a > maxAlignment || a&(a-1) != 0 {
			return nil, d.errorf("general.alignment %v is not a power of two in [1, 2^30]", v)
		}
		f.Alignment = a
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.index = make(map[string]int, nTensors)
	for i := range nTensors {
		ti, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.index[ti.Name]; dup {
			return nil, d.errorf("tensor %d: duplicate name %q", i, ti.Name)
		}
		f.index[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}

	// The data section starts at the next multiple of the alignment. A file
	// without tensor data (a vocabulary-only GGUF) may end before it.
	f.DataOffset = (d.off + f.Alignment - 1) / f.Alignment * f.Alignment
	if err := f.checkTensors(); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *decoder) tensorInfo(i uint64) (TensorInfo, error) {
	var ti TensorInfo
	name, err := d.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return ti, err
	}
	ti.Name = name
	nd, err := d.u32(fmt.Sprintf("tensor %d %q n_dims", i, name))
	if err != nil {
		return ti, err
	}
	if nd > MaxDims {
		return ti, d.errorf("tensor %d %q: %d dimensions (at most %d)", i, name, nd, MaxDims)
	}
	ti.Dims = make([]uint64, nd)
	for j := range ti.Dims {
		if ti.Dims[j], err = d.u64(fmt.Sprintf("tensor %d %q dim %d", i, name, j)); err != nil {
			return ti, err
		}
		if ti.Dims[j] > maxDim {
			return ti, d.errorf("tensor %d %q: dim %d is %d (at most 2^40)", i, name, j, ti.Dims[j])
		}
	}
	t, err := d.u32(fmt.Sprintf("tensor %d %q type", i, name))
	if err != nil {
		return ti, err
	}
	ti.Type = GGMLType(t)
	if !ti.Type.Known() {
		return ti, d.errorf("tensor %d %q: unknown ggml type %d", i, name, t)
	}
	if ti.Offset, err = d.u64(fmt.Sprintf("tensor %d %q offset", i, name)); err != nil {
		return ti, err
	}
	// Bound the byte size by the file size while multiplying, so that the
	// product can neither overflow nor describe more data than exists.
	bl, bb := ti.Type.BlockLen(), ti.Type.BlockBytes()
	ne0 := uint64(1)
	if nd > 0 {
		ne0 = ti.Dims[0]
	}
	if ne0%uint64(bl) != 0 {
		return ti, d.errorf("tensor %d %q: row length %d is not a multiple of the %s block (%d)", i, name, ne0, ti.Type, bl)
	}
	limit := uint64(d.size)
	if ne0/uint64(bl) > limit/uint64(bb) {
		return ti, d.errorf("tensor %d %q: dims %v describe more data than the file holds (%d bytes)", i, name, ti.Dims, d.size)
	}
	n := ne0 / uint64(bl) * uint64(bb)
	for _, dim := range ti.Dims[min(1, len(ti.Dims)):] {
		if dim != 0 && n > limit/dim {
			return ti, d.errorf("tensor %d %q: dims %v describe more data than the file holds (%d bytes)", i, name, ti.Dims, d.size)
		}
		n *= dim
	}
	return ti, nil
}

// checkTensors verifies that each tensor's data is aligned, lies inside the
// file and overlaps no other.
func (f *File) checkTensors() error {
	type span struct {
		start, end int64
		i          int
	}
	spans := make([]span, 0, len(f.Tensors))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		n := ti.ByteLen()
		if ti.Offset%uint64(f.Alignment) != 0 {
			return fmt.Errorf("gguf: %s: tensor %d %q: offset %d is not a multiple of the alignment %d", f.Name, i, ti.Name, ti.Offset, f.Alignment)
		}
		if ti.Offset > uint64(f.Size) || f.DataOffset+int64(ti.Offset) > f.Size-n {
			// Say where the data would start without letting the sum wrap
			// into a range that looks like it is inside the file.
			start, carry := bits.Add64(uint64(f.DataOffset), ti.Offset, 0)
			where := fmt.Sprintf("at file offset %d", start)
			if carry != 0 || start > math.MaxInt64 {
				where = "past any file offset"
			}
			return fmt.Errorf("gguf: %s: tensor %d %q: data offset %d (%s, %d bytes long) is beyond the end of the file (size %d)", f.Name, i, ti.Name, ti.Offset, where, n, f.Size)
		}
		start := f.DataOffset + int64(ti.Offset)
		spans = append(spans, span{start, start + n, i})
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return cmpInt64(a.start, b.start)
		}
		return cmpInt64(a.end, b.end)
	})
	for k := 1; k < len(spans); k++ {
		a, b := spans[k-1], spans[k]
		if b.start < a.end && b.start != b.end && a.start != a.end {
			return fmt.Errorf("gguf: %s: tensor %d %q data [%d, %d) overlaps tensor %d %q data [%d, %d)",
				f.Name, b.i, f.Tensors[b.i].Name, b.start, b.end, a.i, f.Tensors[a.i].Name, a.start, a.end)
		}
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (d *decoder) value(t ValueType, key string, depth int) (any, error) {
	what := fmt.Sprintf("metadata %q", key)
	switch t {
	case ValueUint8:
		return d.u8(what)
	case ValueInt8:
		v, err := d.u8(what)
		return int8(v), err
	case ValueUint16:
		return d.u16(what)
	case ValueInt16:
		v, err := d.u16(what)
		return int16(v), err
	case ValueUint32:
		return d.u32(what)
	case ValueInt32:
		v, err := d.u32(what)
		return int32(v), err
	case ValueUint64:
		return d.u64(what)
	case ValueInt64:
		v, err := d.u64(what)
		return int64(v), err
	case ValueFloat32:
		v, err := d.u32(what)
		return math.Float32frombits(v), err
	case ValueFloat64:
		v, err := d.u64(what)
		return math.Float64frombits(v), err
	case ValueBool:
		v, err := d.u8(what)
		if err == nil && v > 1 {
			return nil, d.errorf("%s: bool byte %d at offset %d", what, v, d.off-1)
		}
		return v == 1, err
	case ValueString:
		return d.str(what)
	case ValueArray:
		return d.array(key, depth)
	}
	return nil, d.errorf("%s: unknown value type %d at offset %d", what, uint32(t), d.off-4)
}

func (d *decoder) array(key string, depth int) (any, error) {
	what := fmt.Sprintf("metadata %q", key)
	if depth >= maxNesting {
		return nil, d.errorf("%s: arrays nested deeper than %d", what, maxNesting)
	}
	at := d.off
	et, err := d.u32(what + " array type")
	if err != nil {
		return nil, err
	}
	n, err := d.u64(what + " array length")
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	esize, fixed := elem.size()
	if esize == 0 {
		return nil, d.errorf("%s: unknown array element type %d at offset %d", what, et, at)
	}
	if n > uint64(d.remaining())/uint64(esize) {
		return nil, d.errorf("%s: array of %d %s at offset %d does not fit in the file (%d bytes)", what, n, elem, at, d.size)
	}
	if fixed {
		raw := make([]byte, n*uint64(esize))
		if err := d.read(raw, what); err != nil {
			return nil, err
		}
		if elem == ValueBool {
			for i, b := range raw {
				if b > 1 {
					return nil, d.errorf("%s: bool byte %d at offset %d", what, b, d.off-int64(len(raw))+int64(i))
				}
			}
		}
		return decodeFixed(elem, raw, int(n)), nil
	}
	if elem == ValueString {
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str(what); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	out := make([]any, n)
	for i := range out {
		if out[i], err = d.array(key, depth+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeFixed(t ValueType, raw []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return raw
	case ValueInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(raw[i])
		}
		return out
	case ValueBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = raw[i] != 0
		}
		return out
	case ValueUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(raw[2*i:])
		}
		return out
	case ValueInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(raw[2*i:]))
		}
		return out
	case ValueUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(raw[4*i:])
		}
		return out
	case ValueInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(raw[4*i:]))
		}
		return out
	case ValueFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
		return out
	case ValueUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(raw[8*i:])
		}
		return out
	case ValueInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(raw[8*i:]))
		}
		return out
	case ValueFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		return out
	}
	panic("gguf: decodeFixed: not a fixed-size type")
}

package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/cortiq/cortiq/tensor"
)

// maxNameLen is llama.cpp's GGML_MAX_NAME minus the terminating NUL: a longer
// tensor name makes llama.cpp refuse the file.
const maxNameLen = 63

// Writer writes a GGUF version 3 file in one pass: declare the metadata and
// every tensor first (AddMetadata, AddTensor), then give each tensor's data
// in declaration order (WriteTensorData), then Close. Only the tensor being
// written needs to be in memory.
//
// Metadata values take the Go types Read produces: uint8, int8, uint16,
// int16, uint32, int32, uint64, int64, float32, float64, bool, string, a
// slice of one of those, or []any whose elements are themselves arrays.
// Plain int is rejected: GGUF readers check value types, so the width must be
// chosen deliberately (llama.cpp expects uint32 for most counts).
type Writer struct {
	w         *bufio.Writer
	closer    io.Closer
	name      string
	alignment int64

	keys []string
	vals map[string]any

	tensors  []TensorInfo
	index    map[string]int
	dataSize uint64 // padded size of the data section so far

	headerDone bool
	next       int // index of the next tensor whose data is expected
	err        error
}

// NewWriter returns a Writer on w. Close does not close w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{
		w:         bufio.NewWriterSize(w, 1<<20),
		name:      "writer",
		alignment: DefaultAlignment,
		vals:      map[string]any{},
		index:     map[string]int{},
	}
}

// Create creates (truncating) the file at path and returns a Writer on it;
// Close closes the file.
func Create(path string) (*Writer, error) {
	fd, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	w := NewWriter(fd)
	w.closer = fd
	w.name = path
	return w, nil
}

func (w *Writer) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf: %s: "+format, append([]any{w.name}, args...)...)
}

// SetAlignment sets general.alignment (a power of two). It must come before
// any AddTensor.
func (w *Writer) SetAlignment(n int) error {
	if n <= 0 || n > maxAlignment || n&(n-1) != 0 {
		return w.errorf("alignment %d is not a power of two", n)
	}
	if _, ok := w.vals["general.alignment"]; ok {
		w.vals["general.alignment"] = uint32(n)
		w.alignment = int64(n)
		return nil
	}
	return w.AddMetadata("general.alignment", uint32(n))
}

// AddMetadata appends a key-value pair. Keys must be unique. Setting
// general.alignment (as uint32) sets the tensor alignment; it must come
// before any AddTensor.
func (w *Writer) AddMetadata(key string, value any) error {
	if w.headerDone {
		return w.errorf("metadata %q added after tensor data started", key)
	}
	if _, dup := w.vals[key]; dup {
		return w.errorf("duplicate metadata key %q", key)
	}
	if err := checkValue(value, 0); err != nil {
		return w.errorf("metadata %q: %v", key, err)
	}
	if key == "general.alignment" {
		a, ok := value.(uint32)
		if !ok || a == 0 || a > maxAlignment || a&(a-1) != 0 {
			return w.errorf("general.alignment must be a uint32 power of two, got %T %v", value, value)
		}
		if len(w.tensors) > 0 {
			return w.errorf("general.alignment set after tensors were added")
		}
		w.alignment = int64(a)
	}
	w.keys = append(w.keys, key)
	w.vals[key] = value
	return nil
}

// AddTensor declares a tensor of codec c with a PyTorch-order shape.
func (w *Writer) AddTensor(name string, c tensor.Codec, shape []int) error {
	typ, err := TypeOf(c)
	if err != nil {
		return w.errorf("tensor %q: %v", name, err)
	}
	if len(shape) > MaxDims {
		return w.errorf("tensor %q: shape %v has more than %d dimensions", name, shape, MaxDims)
	}
	dims := make([]uint64, len(shape))
	for i, d := range shape {
		if d < 0 {
			return w.errorf("tensor %q: negative dimension in shape %v", name, shape)
		}
		dims[len(shape)-1-i] = uint64(d)
	}
	return w.AddTensorInfo(name, typ, dims)
}

// AddTensorInfo declares a tensor of any known ggml type with GGUF-order
// dims (innermost first), as found in a TensorInfo. It serves copying
// tensors the engine has no codec for.
func (w *Writer) AddTensorInfo(name string, typ GGMLType, dims []uint64) error {
	if w.headerDone {
		return w.errorf("tensor %q added after tensor data started", name)
	}
	if len(name) > maxNameLen {
		return w.errorf("tensor name %q is longer than %d bytes (llama.cpp's limit)", name, maxNameLen)
	}
	if _, dup := w.index[name]; dup {
		return w.errorf("duplicate tensor %q", name)
	}
	if !typ.Known() {
		return w.errorf("tensor %q: unknown ggml type %d", name, uint32(typ))
	}
	if len(dims) > MaxDims {
		return w.errorf("tensor %q: %d dimensions (at most %d)", name, len(dims), MaxDims)
	}
	ti := TensorInfo{Name: name, Type: typ, Dims: append([]uint64(nil), dims...), Offset: w.dataSize}
	ne0 := uint64(1)
	if len(dims) > 0 {
		ne0 = dims[0]
	}
	if ne0%uint64(typ.BlockLen()) != 0 {
		return w.errorf("tensor %q: row length %d is not a multiple of the %s block (%d)", name, ne0, typ, typ.BlockLen())
	}
	n := ne0 / uint64(typ.BlockLen()) * uint64(typ.BlockBytes())
	for _, d := range dims {
		if d > maxDim {
			return w.errorf("tensor %q: dims %v too large", name, dims)
		}
	}
	for _, d := range dims[min(1, len(dims)):] {
		if d != 0 && n > (1<<62)/d {
			return w.errorf("tensor %q: dims %v too large", name, dims)
		}
		n *= d
	}
	w.index[name] = len(w.tensors)
	w.tensors = append(w.tensors, ti)
	w.dataSize += pad(n, uint64(w.alignment))
	return nil
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

// WriteTensorData writes the data of the next declared tensor; name must
// match it and len(data) must be its encoded size. The first call writes
// the header.
func (w *Writer) WriteTensorData(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if err := w.writeHeader(); err != nil {
		return err
	}
	if w.next >= len(w.tensors) {
		return w.errorf("tensor %q: all declared tensors were already written", name)
	}
	ti := &w.tensors[w.next]
	if ti.Name != name {
		return w.errorf("tensor %q written out of order: expected %q", name, ti.Name)
	}
	if n := ti.ByteLen(); int64(len(data)) != n {
		return w.errorf("tensor %q: %d bytes of data, its %s dims %v need %d", name, len(data), ti.Type, ti.Dims, n)
	}
	if _, err := w.w.Write(data); err != nil {
		return w.fail(fmt.Errorf("gguf: %s: tensor %q: %w", w.name, name, err))
	}
	if err := w.zeros(pad(uint64(len(data)), uint64(w.alignment)) - uint64(len(data))); err != nil {
		return err
	}
	w.next++
	return nil
}

// WriteTensor writes t's data as the next declared tensor (t.Name must be
// it), checking that its codec and shape match the declaration.
func (w *Writer) WriteTensor(t *tensor.Tensor) error {
	if w.next < len(w.tensors) {
		ti := &w.tensors[w.next]
		typ, err := TypeOf(t.Codec)
		if err != nil {
			return w.errorf("tensor %q: %v", t.Name, err)
		}
		if ti.Name == t.Name && (typ != ti.Type || !equalInts(ti.Shape(), t.Shape)) {
			return w.errorf("tensor %q: %s %v does not match its declaration %s %v", t.Name, t.Codec, t.Shape, ti.Type, ti.Shape())
		}
	}
	return w.WriteTensorData(t.Name, t.Data)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Close writes the header if no tensor data was written, checks that every
// declared tensor was written, flushes, and closes the file Create opened.
func (w *Writer) Close() error {
	err := w.err
	if err == nil {
		err = w.writeHeader()
	}
	if err == nil && w.next != len(w.tensors) {
		err = w.errorf("closed after %d of %d tensors: %q has no data", w.next, len(w.tensors), w.tensors[w.next].Name)
	}
	if err == nil {
		if ferr := w.w.Flush(); ferr != nil {
			err = fmt.Errorf("gguf: %s: %w", w.name, ferr)
		}
	}
	if w.closer != nil {
		if cerr := w.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("gguf: %w", cerr)
		}
		w.closer = nil
	}
	if w.err == nil {
		w.err = errors.New("gguf: writer is closed")
		if err != nil {
			w.err = err
		}
	}
	return err
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) writeHeader() error {
	if w.headerDone {
		return nil
	}
	w.headerDone = true
	e := &encoder{w: w.w}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.keys)))
	for _, k := range w.keys {
		e.str(k)
		e.value(w.vals[k])
	}
	for i := range w.tensors {
		ti := &w.tensors[i]
		e.str(ti.Name)
		e.u32(uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			e.u64(d)
		}
		e.u32(uint32(ti.Type))
		e.u64(ti.Offset)
	}
	if e.err != nil {
		return w.fail(fmt.Errorf("gguf: %s: writing header: %w", w.name, e.err))
	}
	if len(w.tensors) == 0 {
		// No data section follows: llama.cpp writes vocabulary-only
		// files without the trailing padding, and so do we.
		return nil
	}
	return w.zeros(pad(e.n, uint64(w.alignment)) - e.n)
}

var zeroPad [256]byte

func (w *Writer) zeros(n uint64) error {
	for n > 0 {
		k := min(n, uint64(len(zeroPad)))
		if _, err := w.w.Write(zeroPad[:k]); err != nil {
			return w.fail(fmt.Errorf("gguf: %s: %w", w.name, err))
		}
		n -= k
	}
	return nil
}

// checkValue rejects values the encoder cannot represent, so that a bad
// value fails at AddMetadata rather than halfway through the header.
func checkValue(v any, depth int) error {
	switch v := v.(type) {
	case uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64, bool, string:
		return nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []uint64, []int64, []float32, []float64, []bool, []string:
		return nil
	case []any:
		if depth >= maxNesting-1 {
			return fmt.Errorf("arrays nested deeper than %d", maxNesting)
		}
		for i, e := range v {
			if _, ok := arrayElemType(e); !ok {
				return fmt.Errorf("element %d of a nested array is %T, not an array", i, e)
			}
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case int, uint:
		return fmt.Errorf("type %T has no fixed width; use int32, uint32, int64, ...", v)
	}
	return fmt.Errorf("unsupported value type %T", v)
}

func arrayElemType(v any) (ValueType, bool) {
	switch v.(type) {
	case []uint8:
		return ValueUint8, true
	case []int8:
		return ValueInt8, true
	case []uint16:
		return ValueUint16, true
	case []int16:
		return ValueInt16, true
	case []uint32:
		return ValueUint32, true
	case []int32:
		return ValueInt32, true
	case []uint64:
		return ValueUint64, true
	case []int64:
		return ValueInt64, true
	case []float32:
		return ValueFloat32, true
	case []float64:
		return ValueFloat64, true
	case []bool:
		return ValueBool, true
	case []string:
		return ValueString, true
	case []any:
		return ValueArray, true
	}
	return 0, false
}

type encoder struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(p)
	e.n += uint64(len(p))
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
		e.n += uint64(len(s))
	}
}

// value writes a type tag and a value checked by checkValue.
func (e *encoder) value(v any) {
	switch v := v.(type) {
	case uint8:
		e.u32(uint32(ValueUint8))
		e.u8(v)
	case int8:
		e.u32(uint32(ValueInt8))
		e.u8(uint8(v))
	case uint16:
		e.u32(uint32(ValueUint16))
		e.u16(v)
	case int16:
		e.u32(uint32(ValueInt16))
		e.u16(uint16(v))
	case uint32:
		e.u32(uint32(ValueUint32))
		e.u32(v)
	case int32:
		e.u32(uint32(ValueInt32))
		e.u32(uint32(v))
	case uint64:
		e.u32(uint32(ValueUint64))
		e.u64(v)
	case int64:
		e.u32(uint32(ValueInt64))
		e.u64(uint64(v))
	case float32:
		e.u32(uint32(ValueFloat32))
		e.u32(math.Float32bits(v))
	case float64:
		e.u32(uint32(ValueFloat64))
		e.u64(math.Float64bits(v))
	case bool:
		e.u32(uint32(ValueBool))
		e.u8(boolByte(v))
	case string:
		e.u32(uint32(ValueString))
		e.str(v)
	default:
		e.u32(uint32(ValueArray))
		e.array(v)
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// array writes an array's element type, length and elements.
func (e *encoder) array(v any) {
	et, _ := arrayElemType(v)
	e.u32(uint32(et))
	switch v := v.(type) {
	case []uint8:
		e.u64(uint64(len(v)))
		e.raw(v)
	case []int8:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u8(uint8(x))
		}
	case []uint16:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u16(x)
		}
	case []int16:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u16(uint16(x))
		}
	case []uint32:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(x)
		}
	case []int32:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []uint64:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u64(x)
		}
	case []int64:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u64(uint64(x))
		}
	case []float32:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(math.Float32bits(x))
		}
	case []float64:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u64(math.Float64bits(x))
		}
	case []bool:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u8(boolByte(x))
		}
	case []string:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.str(x)
		}
	case []any:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.array(x)
		}
	}
}

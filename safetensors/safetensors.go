// Package safetensors reads and writes the safetensors format
// (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// length, a JSON header mapping tensor names to {dtype, shape, data_offsets},
// and a data area holding the tensors' bytes.
//
// The reader treats every file as hostile: the header length is bounded by
// the file size and by MaxHeaderSize, every tensor's byte range must lie in the
// data area, match its shape and dtype exactly and not overlap another tensor.
// No allocation is sized by an unchecked header field.
//
// Open memory-maps the file where the platform allows it (tensor bytes then
// alias the mapping and stay valid until Close); elsewhere it reads through
// io.ReaderAt.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/cortiq/cortiq/internal/jsonerr"
	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/tensor"
)

// MaxHeaderSize bounds the JSON header (the reference implementation uses the
// same 100 MB limit).
const MaxHeaderSize = 100 << 20

// DType is a safetensors element type name as it appears in the header.
type DType string

const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

var dtypeSize = map[DType]int{
	F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, Bool: 1,
	"U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1,
}

// Size is the byte size of one element, 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSize[d] }

// Codec maps the dtype to a tensor codec; ok is false for dtypes the engine
// cannot use as weights.
func (d DType) Codec() (c tensor.Codec, ok bool) {
	switch d {
	case F32:
		return tensor.F32, true
	case F16:
		return tensor.F16, true
	case BF16:
		return tensor.BF16, true
	case I32:
		return tensor.I32, true
	}
	return 0, false
}

// DTypeOf is the safetensors dtype of a codec; ok is false for block codecs,
// which safetensors cannot represent.
func DTypeOf(c tensor.Codec) (d DType, ok bool) {
	switch c {
	case tensor.F32:
		return F32, true
	case tensor.F16:
		return F16, true
	case tensor.BF16:
		return BF16, true
	case tensor.I32:
		return I32, true
	}
	return "", false
}

// Info describes one tensor of a file.
type Info struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are byte offsets relative to the start of the data area.
	Begin, End int64
}

// Elements is the product of the shape (1 for a scalar).
func (in *Info) Elements() int64 {
	n := int64(1)
	for _, d := range in.Shape {
		n *= int64(d)
	}
	return n
}

// File is an opened safetensors file.
type File struct {
	name     string
	infos    map[string]*Info
	order    []string // names in data order
	metadata map[string]string

	blob    *mapfile.Blob
	dataOff int64 // absolute offset of the data area
}

// Open opens a safetensors file, memory-mapping it when the platform allows.
func Open(path string) (*File, error) {
	b, err := mapfile.OpenBlob(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	sf, err := parse(b, b.Size(), path)
	if err != nil {
		b.Close()
		return nil, err
	}
	sf.blob = b
	return sf, nil
}

// Read parses the safetensors file behind r (size bytes long). name is used
// in error messages only. Tensor bytes are read from r on demand; r must stay
// usable while the File is.
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	sf, err := parse(r, size, name)
	if err != nil {
		return nil, err
	}
	sf.blob = mapfile.NewBlob(r, size)
	return sf, nil
}

// Parse reads a safetensors file held entirely in memory; tensor bytes alias b.
func Parse(b []byte, name string) (*File, error) {
	blob := mapfile.BytesBlob(b)
	sf, err := parse(blob, blob.Size(), name)
	if err != nil {
		return nil, err
	}
	sf.blob = blob
	return sf, nil
}

type rawEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

func parse(r io.ReaderAt, size int64, name string) (*File, error) {
	fail := func(format string, a ...any) (*File, error) {
		return nil, fmt.Errorf("safetensors: %s: %s", name, fmt.Sprintf(format, a...))
	}
	if size < 8 {
		return fail("file of %d bytes is too short for a header", size)
	}
	var lb [8]byte
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return fail("reading header length: %v", err)
	}
	hlen := binary.LittleEndian.Uint64(lb[:])
	if hlen > MaxHeaderSize {
		return fail("header length %d exceeds the %d-byte limit", hlen, MaxHeaderSize)
	}
	if hlen > uint64(size-8) {
		return fail("header length %d exceeds the file size %d", hlen, size)
	}
	if hlen < 2 {
		return fail("header length %d is too short", hlen)
	}
	hb := make([]byte, hlen)
	if _, err := r.ReadAt(hb, 8); err != nil {
		return fail("reading header: %v", err)
	}
	if hb[0] != '{' {
		return fail("header does not start with '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hb, &raw); err != nil {
		return fail("header JSON: %s", jsonerr.Describe(err))
	}
	sf := &File{
		name:    name,
		infos:   make(map[string]*Info, len(raw)),
		dataOff: 8 + int64(hlen),
	}
	dataSize := size - sf.dataOff
	for key, msg := range raw {
		if key == "__metadata__" {
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return fail("__metadata__ must map strings to strings: %s", jsonerr.Describe(err))
			}
			sf.metadata = md
			continue
		}
		var e rawEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return fail("tensor %q: %s", key, jsonerr.Describe(err))
		}
		esz := e.DType.Size()
		if esz == 0 {
			return fail("tensor %q: unknown dtype %q", key, e.DType)
		}
		if len(e.Shape) > 8 {
			return fail("tensor %q: %d dimensions", key, len(e.Shape))
		}
		if len(e.DataOffsets) != 2 {
			return fail("tensor %q: data_offsets must have 2 entries, has %d", key, len(e.DataOffsets))
		}
		n := int64(1)
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 || d > math.MaxInt32 {
				return fail("tensor %q: bad dimension %d in shape %v", key, d, e.Shape)
			}
			if d != 0 && n > (1<<50)/d {
				return fail("tensor %q: shape %v is too large", key, e.Shape)
			}
			n *= d
			shape[i] = int(d)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > dataSize {
			return fail("tensor %q: data_offsets [%d, %d] outside the data area of %d bytes", key, begin, end, dataSize)
		}
		if want := n * int64(esz); end-begin != want {
			return fail("tensor %q: %d bytes for %s%v, want %d", key, end-begin, e.DType, e.Shape, want)
		}
		sf.infos[key] = &Info{Name: key, DType: e.DType, Shape: shape, Begin: begin, End: end}
		sf.order = append(sf.order, key)
	}
	sort.Slice(sf.order, func(i, j int) bool {
		a, b := sf.infos[sf.order[i]], sf.infos[sf.order[j]]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	for i := 1; i < len(sf.order); i++ {
		prev, cur := sf.infos[sf.order[i-1]], sf.infos[sf.order[i]]
		// Zero-length tensors occupy no bytes and may sit anywhere.
		if cur.Begin < prev.End && cur.End > cur.Begin {
			return fail("tensors %q and %q overlap", prev.Name, cur.Name)
		}
	}
	return sf, nil
}

// Name is the path or name the file was opened with.
func (f *File) Name() string { return f.name }

// Names lists the tensors in data order.
func (f *File) Names() []string { return append([]string(nil), f.order...) }

// Info returns the description of a tensor.
func (f *File) Info(name string) (Info, bool) {
	in, ok := f.infos[name]
	if !ok {
		return Info{}, false
	}
	return *in, true
}

// Metadata is the header's __metadata__ map (nil when absent).
func (f *File) Metadata() map[string]string { return f.metadata }

// Bytes returns a tensor's raw little-endian bytes. For a memory-mapped or
// in-memory file they alias it (read-only, valid until Close); otherwise they
// are read into a new buffer.
func (f *File) Bytes(name string) ([]byte, error) {
	in, ok := f.infos[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", f.name, name)
	}
	b, err := f.blob.Range(f.dataOff+in.Begin, in.End-in.Begin)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", f.name, name, err)
	}
	return b, nil
}

// ReadRange reads len(dst) bytes of the named tensor's data, starting off
// bytes into it (copied from a mapping, or read).
func (f *File) ReadRange(name string, off int64, dst []byte) error {
	in, ok := f.infos[name]
	if !ok {
		return fmt.Errorf("safetensors: %s: no tensor %q", f.name, name)
	}
	n := in.End - in.Begin
	if off < 0 || off > n || int64(len(dst)) > n-off {
		return fmt.Errorf("safetensors: %s: tensor %q: range [%d, %d) outside its %d bytes", f.name, name, off, off+int64(len(dst)), n)
	}
	if err := f.blob.ReadRange(dst, f.dataOff+in.Begin+off); err != nil {
		return fmt.Errorf("safetensors: %s: tensor %q: %w", f.name, name, err)
	}
	return nil
}

// Tensor returns a tensor as a tensor.Tensor (F32, F16, BF16 or I32).
func (f *File) Tensor(name string) (*tensor.Tensor, error) {
	in, ok := f.infos[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", f.name, name)
	}
	c, ok := in.DType.Codec()
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %s is not supported as a weight", f.name, name, in.DType)
	}
	b, err := f.Bytes(name)
	if err != nil {
		return nil, err
	}
	return &tensor.Tensor{Name: name, Codec: c, Shape: append([]int(nil), in.Shape...), Data: b}, nil
}

// Float32s decodes a F32, F16 or BF16 tensor into float32 values.
func (f *File) Float32s(name string) ([]float32, error) {
	in, ok := f.infos[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", f.name, name)
	}
	b, err := f.Bytes(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, in.Elements())
	switch in.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = f16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %s is not a float type", f.name, name, in.DType)
	}
	return out, nil
}

// Int64s decodes an integer tensor (I64, I32, I16, I8, U8) into int64 values.
func (f *File) Int64s(name string) ([]int64, error) {
	in, ok := f.infos[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", f.name, name)
	}
	b, err := f.Bytes(name)
	if err != nil {
		return nil, err
	}
	out := make([]int64, in.Elements())
	switch in.DType {
	case I64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(b[i]))
		}
	case U8:
		for i := range out {
			out[i] = int64(b[i])
		}
	default:
		return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %s is not an integer type", f.name, name, in.DType)
	}
	return out, nil
}

// Close releases the file and its mapping. Bytes returned earlier that alias
// the mapping must not be used afterwards.
func (f *File) Close() error { return f.blob.Close() }

// f16ToF32 converts an IEEE half to float32 exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: normalize.
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// Package gguf reads and writes GGUF files (versions 2 and 3), the model
// container of llama.cpp.
//
// A File is read through an io.ReaderAt: Open memory-maps the file where the
// platform allows (linux, darwin) and tensor data then aliases the mapping
// without a copy; elsewhere (and under GOOS=js, where the bytes may come from
// HTTP range requests) tensor data is read into memory on demand.
//
// Every count and length in the header is checked against the file size
// before anything is allocated, so a hostile or truncated file produces an
// error naming the file and the offending field, never a panic or a huge
// allocation. A tensor whose type the engine cannot compute with (Q5_K,
// IQ2_XXS, ...) does not prevent the file from opening; asking for it as a
// tensor.Tensor does.
//
// Tensor dimensions are kept as GGUF stores them (ne[0], the innermost, first)
// in TensorInfo.Dims; File.Tensor returns the PyTorch-order shape (reversed),
// which is the engine's convention.
//
// Writer produces version 3 files that llama.cpp loads: metadata in the order
// given, tensor infos, then tensor data, each tensor aligned to
// general.alignment (32 unless set) and padded to it, the last one included.
package gguf

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/tensor"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a ggml tensor has.
const MaxDims = 4

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	Type GGMLType
	// Dims as GGUF stores them: Dims[0] (ggml's ne[0]) is the innermost,
	// contiguous dimension.
	Dims []uint64
	// Offset of the data from File.DataOffset.
	Offset uint64
}

// Shape is the PyTorch-order shape: Dims reversed.
func (ti *TensorInfo) Shape() []int {
	s := make([]int, len(ti.Dims))
	for i, d := range ti.Dims {
		s[len(ti.Dims)-1-i] = int(d)
	}
	return s
}

// Elements is the product of the dimensions.
func (ti *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range ti.Dims {
		n *= int64(d)
	}
	return n
}

// ByteLen is the encoded size of the tensor's data (0 for an unknown type).
func (ti *TensorInfo) ByteLen() int64 {
	bl := ti.Type.BlockLen()
	if bl == 0 {
		return 0
	}
	return ti.Elements() / bl * ti.Type.BlockBytes()
}

// File is an opened GGUF file. Its exported fields describe the header; they
// must not be modified.
type File struct {
	Name       string // the name errors use: the path, or what Read was given
	Version    uint32
	Size       int64 // file size in bytes
	Alignment  int64
	DataOffset int64          // absolute offset of the tensor data section
	Metadata   map[string]any // see the package doc for the Go types
	Keys       []string       // metadata keys in file order
	Tensors    []TensorInfo   // in file order

	blob  *mapfile.Blob
	index map[string]int
}

// Close releases the mapping and the file. Tensor data obtained from a mapped
// file must not be used afterwards.
func (f *File) Close() error { return f.blob.Close() }

// Mapped reports whether tensor data aliases a memory mapping.
func (f *File) Mapped() bool { return f.blob.Mapped() }

// Info returns the description of the named tensor.
func (f *File) Info(name string) (*TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// RawData returns the encoded bytes of the named tensor, whatever its type.
// On a mapped file the slice aliases the mapping; otherwise it is read.
func (f *File) RawData(name string) ([]byte, error) {
	ti, ok := f.Info(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.Name, name)
	}
	return f.rawData(ti)
}

func (f *File) rawData(ti *TensorInfo) ([]byte, error) {
	start := f.DataOffset + int64(ti.Offset)
	n := ti.ByteLen() // checked against the file size at open
	buf, err := f.blob.Range(start, n)
	if err != nil {
		return nil, f.readError(ti.Name, start, n, err)
	}
	return buf, nil
}

// readError words a failed read of a tensor's bytes [start, start+n).
func (f *File) readError(name string, start, n int64, err error) error {
	if errors.Is(err, mapfile.ErrClosed) {
		return fmt.Errorf("gguf: %s: file is closed", f.Name)
	}
	return fmt.Errorf("gguf: %s: tensor %q: reading [%d, %d): %w", f.Name, name, start, start+n, err)
}

// Tensor returns the named tensor with its PyTorch-order shape. It fails for
// a type the engine has no codec for.
func (f *File) Tensor(name string) (*tensor.Tensor, error) {
	ti, ok := f.Info(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.Name, name)
	}
	c, ok := ti.Type.Codec()
	if !ok {
		return nil, fmt.Errorf("gguf: %s: tensor %q: unsupported tensor type %s", f.Name, name, ti.Type)
	}
	data, err := f.rawData(ti)
	if err != nil {
		return nil, err
	}
	return &tensor.Tensor{Name: name, Codec: c, Shape: ti.Shape(), Data: data}, nil
}

// GetString returns a string value.
func (f *File) GetString(key string) (string, bool) {
	s, ok := f.Metadata[key].(string)
	return s, ok
}

// GetBool returns a bool value.
func (f *File) GetBool(key string) (value, ok bool) {
	b, ok := f.Metadata[key].(bool)
	return b, ok
}

// GetInt returns an integer value of any integer type. ok is false when the
// key is absent, not an integer, or a uint64 beyond int64.
func (f *File) GetInt(key string) (int64, bool) {
	return toInt(f.Metadata[key])
}

// GetFloat returns a numeric value (float or integer) as float64.
func (f *File) GetFloat(key string) (float64, bool) {
	switch v := f.Metadata[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	i, ok := toInt(f.Metadata[key])
	return float64(i), ok
}

// GetStrings returns a string array.
func (f *File) GetStrings(key string) ([]string, bool) {
	s, ok := f.Metadata[key].([]string)
	return s, ok
}

// GetInts returns an array of any integer type as int64s.
func (f *File) GetInts(key string) ([]int64, bool) {
	switch v := f.Metadata[key].(type) {
	case []uint8:
		return widen(v), true
	case []int8:
		return widen(v), true
	case []uint16:
		return widen(v), true
	case []int16:
		return widen(v), true
	case []uint32:
		return widen(v), true
	case []int32:
		return widen(v), true
	case []int64:
		return slices.Clone(v), true
	case []uint64:
		out := make([]int64, len(v))
		for i, x := range v {
			if x > math.MaxInt64 {
				return nil, false
			}
			out[i] = int64(x)
		}
		return out, true
	}
	return nil, false
}

// GetFloats returns a float array (float32 or float64) as float64s.
func (f *File) GetFloats(key string) ([]float64, bool) {
	switch v := f.Metadata[key].(type) {
	case []float32:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, true
	case []float64:
		return slices.Clone(v), true
	}
	return nil, false
}

// ArrayLen returns the length of an array value.
func (f *File) ArrayLen(key string) (int, bool) {
	switch v := f.Metadata[key].(type) {
	case []uint8:
		return len(v), true
	case []int8:
		return len(v), true
	case []uint16:
		return len(v), true
	case []int16:
		return len(v), true
	case []uint32:
		return len(v), true
	case []int32:
		return len(v), true
	case []uint64:
		return len(v), true
	case []int64:
		return len(v), true
	case []float32:
		return len(v), true
	case []float64:
		return len(v), true
	case []bool:
		return len(v), true
	case []string:
		return len(v), true
	case []any:
		return len(v), true
	}
	return 0, false
}

// IntValue is v as an int64 when v is a metadata integer of any width (or
// a Go int) that fits, as the Int getters read it.
func IntValue(v any) (int64, bool) { return toInt(v) }

func toInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), true
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	}
	return 0, false
}

func widen[T uint8 | int8 | uint16 | int16 | uint32 | int32](v []T) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

package gguf

import (
	"fmt"

	"github.com/cortiq/cortiq/tensor"
)

// GGMLType is the element type of a GGUF tensor (ggml's enum ggml_type).
type GGMLType uint32

// The ggml tensor types with a stable on-disk layout. Numbers 4, 5, 31-33
// and 36-38 belonged to layouts ggml has since removed; files using them are
// rejected when opened, as llama.cpp does.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
)

type ggmlTypeInfo struct {
	name       string
	blockLen   int64 // elements per block
	blockBytes int64 // bytes per block
}

// ggmlTypes gives every known type's block geometry, so that a file using a
// type the engine cannot compute with still opens (for inspection) and its
// tensors can still be bounds-checked and copied.
var ggmlTypes = map[GGMLType]ggmlTypeInfo{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 18},
	TypeQ4_1:    {"Q4_1", 32, 20},
	TypeQ5_0:    {"Q5_0", 32, 22},
	TypeQ5_1:    {"Q5_1", 32, 24},
	TypeQ8_0:    {"Q8_0", 32, 34},
	TypeQ8_1:    {"Q8_1", 32, 36},
	TypeQ2_K:    {"Q2_K", 256, 84},
	TypeQ3_K:    {"Q3_K", 256, 110},
	TypeQ4_K:    {"Q4_K", 256, 144},
	TypeQ5_K:    {"Q5_K", 256, 176},
	TypeQ6_K:    {"Q6_K", 256, 210},
	TypeQ8_K:    {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S:   {"IQ1_S", 256, 50},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18},
	TypeIQ3_S:   {"IQ3_S", 256, 110},
	TypeIQ2_S:   {"IQ2_S", 256, 82},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", 256, 56},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", 256, 54},
	TypeTQ2_0:   {"TQ2_0", 256, 66},
	TypeMXFP4:   {"MXFP4", 32, 17},
}

// Known reports whether t is a ggml type with a known block layout.
func (t GGMLType) Known() bool { _, ok := ggmlTypes[t]; return ok }

func (t GGMLType) String() string {
	if ti, ok := ggmlTypes[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockLen is the number of elements in one block of t (1 for plain types),
// 0 for an unknown type.
func (t GGMLType) BlockLen() int64 { return ggmlTypes[t].blockLen }

// BlockBytes is the encoded size of one block of t, 0 for an unknown type.
func (t GGMLType) BlockBytes() int64 { return ggmlTypes[t].blockBytes }

// Codec maps t to the engine codec with the same byte layout. ok is false for
// types the engine cannot compute with.
func (t GGMLType) Codec() (c tensor.Codec, ok bool) {
	for c, g := range codecTypes {
		if g == t && (g != 0 || c == int(tensor.F32)) {
			return tensor.Codec(c), true
		}
	}
	return 0, false
}

// codecTypes maps each engine codec to its GGUF tensor type (same bytes).
var codecTypes = [tensor.NumCodecs]GGMLType{
	tensor.F32:     TypeF32,
	tensor.F16:     TypeF16,
	tensor.BF16:    TypeBF16,
	tensor.Q8_0:    TypeQ8_0,
	tensor.Q4_0:    TypeQ4_0,
	tensor.Q4_K:    TypeQ4_K,
	tensor.Q6_K:    TypeQ6_K,
	tensor.I32:     TypeI32,
	tensor.Q4_1:    TypeQ4_1,
	tensor.Q5_0:    TypeQ5_0,
	tensor.Q5_1:    TypeQ5_1,
	tensor.Q2_K:    TypeQ2_K,
	tensor.Q3_K:    TypeQ3_K,
	tensor.Q5_K:    TypeQ5_K,
	tensor.IQ4_NL:  TypeIQ4_NL,
	tensor.IQ4_XS:  TypeIQ4_XS,
	tensor.IQ3_XXS: TypeIQ3_XXS,
	tensor.IQ3_S:   TypeIQ3_S,
	tensor.IQ2_XXS: TypeIQ2_XXS,
	tensor.IQ2_XS:  TypeIQ2_XS,
	tensor.IQ2_S:   TypeIQ2_S,
	tensor.IQ1_S:   TypeIQ1_S,
	tensor.IQ1_M:   TypeIQ1_M,
	tensor.TQ1_0:   TypeTQ1_0,
	tensor.TQ2_0:   TypeTQ2_0,
	tensor.MXFP4:   TypeMXFP4,
}

// TypeOf maps an engine codec to its GGUF tensor type.
func TypeOf(c tensor.Codec) (GGMLType, error) {
	if int(c) < len(codecTypes) && (codecTypes[c] != 0 || c == tensor.F32) {
		return codecTypes[c], nil
	}
	return 0, fmt.Errorf("gguf: codec %v has no GGUF tensor type", c)
}

// ValueType is the type tag of a metadata value.
type ValueType uint32

const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("value_type(%d)", uint32(v))
}

// size is the encoded size of a fixed-size value, or the minimum encoded size
// of a variable one (a string is at least its 8-byte length, an array at
// least its 12-byte type and count). It bounds element counts before any
// allocation.
func (v ValueType) size() (n int64, fixed bool) {
	switch v {
	case ValueUint8, ValueInt8, ValueBool:
		return 1, true
	case ValueUint16, ValueInt16:
		return 2, true
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4, true
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8, true
	case ValueString:
		return 8, false
	case ValueArray:
		return 12, false
	}
	return 0, false
}

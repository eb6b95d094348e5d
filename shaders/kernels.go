package shaders

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"

	"github.com/cortiq/cortiq/tensor"
)

// Bind is how a kernel binds one resource of group 0.
type Bind uint8

const (
	Uniform   Bind = iota // var<uniform>
	ReadOnly              // var<storage, read>
	ReadWrite             // var<storage, read_write>
)

// Flag is a WGSL u32 used as a boolean (0 or 1).
type Flag uint32

// FlagOf is 1 for true, 0 for false.
func FlagOf(b bool) Flag {
	if b {
		return 1
	}
	return 0
}

// Params is a kernel's uniform: a struct whose fields mirror the kernel's
// WGSL `struct P` field for field (u32 as uint32 or Flag, f32 as float32,
// WGSL padding as blank fields), packed by Pack. Kernel names the table
// entry it belongs to. Zero fields are zero in the uniform, so a caller
// names only what it sets.
type Params interface{ Kernel() string }

// Pack encodes p little-endian with encoding/binary (the WGSL uniform
// layout of a struct of 4-byte scalars), zero-padded to a multiple of 16
// bytes.
func Pack(p Params) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, p)
	if err != nil {
		panic(fmt.Sprintf("shaders: params %T: %v", p, err)) // a table defect: TestKernelTable packs every entry
	}
	for len(b)%16 != 0 {
		b = append(b, 0, 0, 0, 0)
	}
	return b
}

// Kernel is one entry of the kernel table: a kernel's name, its bindings
// and its params struct, and the source variants the backends build from
// it (TestKernelTable checks every variant's `struct P` and bindings
// against Binds and Params).
type Kernel struct {
	Name   string
	Binds  []Bind // bindings 0..n-1 of group 0
	Params Params // the zero params struct; nil for a kernel without a uniform
	// Variants returns a representative module of every source variant
	// (codecs, KV codecs, row blocks), keyed by a variant name.
	Variants func() (map[string]string, error)
}

// Kernel names of the modules assembled with a codec prelude or a generated
// body (the self-contained ones are named above and in hybrid.go).
const (
	KEmbed      = "embed"
	KMatmul     = "matmul"      // matmul_io.wgsl: the row-blocked matmul, the staged matvec, the tiled GEMM
	KMatmulNorm = "matmul_norm" // the one-token matmul with the fused RMSNorm (binding 6: norm weights)
	KRMSNorm    = "rmsnorm"
	KRMSNormIP  = "rmsnorm_ip"  // RMSNorm in place
	KExperts    = "moe_matmul"  // routed-expert matvec and GEMM
	KMatmulComb = "matmul_comb" // the staged one-token matvec over attention's split-K partials (binding 6)
)

var (
	bindsMatmul     = []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadOnly}
	bindsMatmulNorm = []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadOnly, ReadOnly}
	bindsAttn       = []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}
)

// one is a Variants of one fixed module.
func one(name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		src, err := Source(name)
		return map[string]string{name: src}, err
	}
}

func hybrid(name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		src, err := Hybrid(name)
		return map[string]string{name: src}, err
	}
}

// perCodec is a Variants of one module per codec.
func perCodec(gen func(c tensor.Codec) (string, error)) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		m := map[string]string{}
		for _, c := range Codecs {
			src, err := gen(c)
			if err != nil {
				return nil, err
			}
			m[c.String()] = src
		}
		return m, nil
	}
}

// table is the kernel table, filled by init (its entries' variants read
// sources, and read expands the params structs from the table).
var (
	table  []Kernel
	byName map[string]*Kernel
	byType map[string]Params // params struct name → zero value, for read
)

func init() {
	table = []Kernel{
		{KEmbed, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, EmbedParams{}, perCodec(Embed)},
		{KMatmul, bindsMatmul, MatmulParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, c := range Codecs {
				for _, v := range []struct{ tb, r int }{{1, 1}, {1, 4}, {8, 2}} {
					src, err := MatmulRows(c, v.tb, v.r)
					if err != nil {
						return nil, err
					}
					m[fmt.Sprintf("%s/tb%d/r%d", c, v.tb, v.r)] = src
				}
				src, err := Gemm(c)
				if err != nil {
					return nil, err
				}
				m["gemm/"+c.String()] = src
				if MatvecCodec(c) {
					if src, err = Matvec(c, MatvecShape{Rows: 2, Sets: 1, Groups: 1}, 256, false); err != nil {
						return nil, err
					}
					m["matvec/"+c.String()] = src
				}
			}
			return m, nil
		}},
		{KMatmulNorm, bindsMatmulNorm, MatmulParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, c := range Codecs {
				src, err := MatmulRowsNorm(c, 1, 4)
				if err != nil {
					return nil, err
				}
				m[c.String()] = src
				if MatvecCodec(c) {
					if src, err = Matvec(c, MatvecShape{Rows: 2, Sets: 1, Groups: 1}, 256, true); err != nil {
						return nil, err
					}
					m["matvec/"+c.String()] = src
				}
			}
			return m, nil
		}},
		{KMatmulComb, bindsMatmulNorm, MatmulParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, c := range Codecs {
				if MatvecCodec(c) {
					src, err := MatvecComb(c, MatvecShape{Rows: 4, Sets: 4, Groups: 1}, 256, Comb{Heads: 4, HD: 64, SplitLen: 64, MaxSplits: 32})
					if err != nil {
						return nil, err
					}
					m[c.String()] = src
				}
			}
			return m, nil
		}},
		{KRMSNorm, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, NormParams{}, func() (map[string]string, error) {
			return map[string]string{"": RMSNorm(false)}, nil
		}},
		{KRMSNormIP, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite}, NormParams{}, func() (map[string]string, error) {
			return map[string]string{"": RMSNorm(true)}, nil
		}},
		{QKVPrep, []Bind{Uniform, ReadOnly, ReadWrite, ReadWrite, ReadWrite, ReadOnly, ReadOnly}, PrepParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, f16 := range []bool{false, true} {
				src, err := SourceKV(QKVPrep, f16)
				if err != nil {
					return nil, err
				}
				m[fmt.Sprint("f16=", f16)] = src
			}
			return m, nil
		}},
		{Attention, bindsAttn, AttnParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, f16 := range []bool{false, true} {
				src, err := SourceKV(Attention, f16)
				if err != nil {
					return nil, err
				}
				m[fmt.Sprint("f16=", f16)] = src
				if src, err = AttnPrefillKV(64, AttnPrefillBlock, f16); err != nil {
					return nil, err
				}
				m[fmt.Sprint("prefill/f16=", f16)] = src
			}
			return m, nil
		}},
		{AttentionPrep, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite, ReadWrite, ReadWrite, ReadWrite, ReadOnly, ReadOnly}, AttnPrepParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, f16 := range []bool{false, true} {
				src, err := SourceKV(AttentionPrep, f16)
				if err != nil {
					return nil, err
				}
				m[fmt.Sprint("f16=", f16)] = src
			}
			return m, nil
		}},
		{Combine, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite}, CombineParams{}, one(Combine)},
		{ActMul, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite}, ActMulParams{}, one(ActMul)},
		{ArgmaxPart, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite}, ArgmaxPartParams{}, one(ArgmaxPart)},
		{Argmax, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite, ReadWrite}, ArgmaxParams{}, one(Argmax)},
		{Advance, []Bind{ReadWrite}, nil, one(Advance)},

		{ShortConv, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}, ShortConvParams{}, hybrid(ShortConv)},
		{DeltaConv, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}, DeltaConvParams{}, hybrid(DeltaConv)},
		{DeltaRule, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}, DeltaRuleParams{}, hybrid(DeltaRule)},
		{AttnGate, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite}, AttnGateParams{}, hybrid(AttnGate)},
		{MoERoute, []Bind{Uniform, ReadOnly, ReadWrite, ReadOnly, ReadWrite, ReadWrite}, RouteParams{}, hybrid(MoERoute)},
		{KExperts, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadOnly, ReadOnly}, ExpertParams{}, func() (map[string]string, error) {
			m, err := perCodec(ExpertMatmul)()
			if err != nil {
				return nil, err
			}
			g, err := perCodec(func(c tensor.Codec) (string, error) { return ExpertGemm(c, 8) })()
			for k, v := range g {
				m["gemm/"+k] = v
			}
			return m, err
		}},
		{MoECombine, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, MoECombineParams{}, hybrid(MoECombine)},

		{Conv2D, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, Conv2DParams{}, one(Conv2D)},
		{GroupNormStats, []Bind{Uniform, ReadOnly, ReadWrite, ReadWrite}, GroupNormStatsParams{}, one(GroupNormStats)},
		{GroupNormApply, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, GroupNormApplyParams{}, one(GroupNormApply)},
		{CopyF32, []Bind{Uniform, ReadOnly, ReadWrite}, CopyF32Params{}, one(CopyF32)},
		{AttentionFull, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, AttentionFullParams{}, one(AttentionFull)},
		{AttentionTiled, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, AttentionFullParams{}, func() (map[string]string, error) {
			m := map[string]string{}
			for _, hd := range []int{32, 64, 128} {
				src, err := AttentionTiledSrc(hd)
				if err != nil {
					return nil, err
				}
				m[fmt.Sprint("hd", hd)] = src
			}
			return m, nil
		}},
		{Conv2DTiled, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, Conv2DParams{}, one(Conv2DTiled)},
		{NormAdd, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}, NormAddParams{}, one(NormAdd)},
		{RowsNorm, []Bind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite}, RowsNormParams{}, one(RowsNorm)},
		{QKRope, []Bind{Uniform, ReadOnly, ReadOnly, ReadWrite}, QKRopeParams{}, one(QKRope)},
	}
	byName, byType = map[string]*Kernel{}, map[string]Params{}
	for i := range table {
		k := &table[i]
		if byName[k.Name] != nil {
			panic("shaders: kernel " + k.Name + " twice in the table")
		}
		byName[k.Name] = k
		if k.Params == nil {
			continue
		}
		if k.Params.Kernel() != k.Name && !sharedParams(k) {
			panic("shaders: kernel " + k.Name + " has the params of " + k.Params.Kernel())
		}
		byType[reflect.TypeOf(k.Params).Name()] = k.Params
	}
}

// sharedParams reports whether k reuses another entry's params struct (its
// variant with one more binding, or a tiled form of the same kernel).
func sharedParams(k *Kernel) bool {
	switch k.Name {
	case KMatmulNorm, KMatmulComb, KRMSNormIP, AttentionTiled, Conv2DTiled:
		return true
	}
	return false
}

// Kernels is the kernel table, in a fixed order.
func Kernels() []Kernel { return append([]Kernel(nil), table...) }

// Lookup is the table entry of kernel name; it panics on a name not in the
// table (a program defect: the names are this package's constants).
func Lookup(name string) *Kernel {
	k := byName[name]
	if k == nil {
		panic("shaders: no kernel " + name + " in the table")
	}
	return k
}

// paramsLine is a WGSL source's line naming its params struct: read
// replaces it with the struct's WGSL declaration.
var paramsLine = regexp.MustCompile(`(?m)^//!P (\w+)\b.*$`)

// expandParams replaces every `//!P <struct>` line of src by the WGSL
// `struct P` of that params struct.
func expandParams(src string) string {
	return paramsLine.ReplaceAllStringFunc(src, func(line string) string {
		name := paramsLine.FindStringSubmatch(line)[1]
		p, ok := byType[name]
		if !ok {
			panic("shaders: WGSL names params struct " + name + ", not in the kernel table") // a build defect
		}
		return wgslStruct(p)
	})
}

// wgslStruct is the WGSL declaration of params struct p: `struct P` with
// one member per 4-byte word, u32 for uint32 and Flag, i32 for int32, f32
// for float32, named by the field's wgsl tag or its name in snake case;
// blank fields (arrays of them too) are padding words _pad0, _pad1, ….
func wgslStruct(p Params) string {
	var b strings.Builder
	b.WriteString("struct P {\n")
	rt := reflect.TypeOf(p)
	pad := 0
	for i := range rt.NumField() {
		f := rt.Field(i)
		ft, n := f.Type, 1
		if ft.Kind() == reflect.Array {
			ft, n = ft.Elem(), ft.Len()
		}
		var typ string
		switch ft.Kind() {
		case reflect.Uint32:
			typ = "u32"
		case reflect.Int32:
			typ = "i32"
		case reflect.Float32:
			typ = "f32"
		default:
			panic(fmt.Sprintf("shaders: %s.%s: %s is not a WGSL scalar", rt.Name(), f.Name, ft)) // a table defect
		}
		for range n {
			name := f.Tag.Get("wgsl")
			switch {
			case f.Name == "_":
				name = fmt.Sprintf("_pad%d", pad)
				pad++
			case name == "":
				name = snake(f.Name)
			}
			fmt.Fprintf(&b, "    %s: %s,\n", name, typ)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// snake is a Go field name in snake case: KVHeads kv_heads, HasBias
// has_bias, HD hd, Row0 row0.
func snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// paramsSize is the bytes of a params struct as Pack writes it.
func paramsSize(p Params) int { return (binary.Size(p) + 15) &^ 15 }

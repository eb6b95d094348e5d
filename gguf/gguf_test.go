package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/cortiq/cortiq/fixtures"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// sampleMetadata exercises every value type.
func sampleMetadata() ([]string, map[string]any) {
	keys := []string{
		"general.architecture", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64",
		"f32", "f64", "t", "f", "strs", "f32s", "i32s", "u8s", "bools", "nested", "empty",
	}
	vals := map[string]any{
		"general.architecture": "llama",
		"u8":                   uint8(200),
		"i8":                   int8(-100),
		"u16":                  uint16(60000),
		"i16":                  int16(-30000),
		"u32":                  uint32(4000000000),
		"i32":                  int32(-2000000000),
		"u64":                  uint64(1) << 63,
		"i64":                  int64(-1) << 62,
		"f32":                  float32(1e-5),
		"f64":                  math.Pi,
		"t":                    true,
		"f":                    false,
		"strs":                 []string{"<unk>", "", "héllo", "\x00\xff"},
		"f32s":                 []float32{0, -1.5, float32(math.Inf(1))},
		"i32s":                 []int32{1, -2, 3},
		"u8s":                  []uint8{1, 2, 3},
		"bools":                []bool{true, false},
		"nested":               []any{[]int32{1, 2}, []string{"a"}, []any{[]uint64{7}}},
		"empty":                []string{},
	}
	return keys, vals
}

func sampleTensors() []*tensor.Tensor {
	f32 := make([]byte, 4*3*5)
	for i := range f32 {
		f32[i] = byte(i)
	}
	q8 := make([]byte, 2*34)
	for i := range q8 {
		q8[i] = byte(3 * i)
	}
	q4k := make([]byte, 144)
	for i := range q4k {
		q4k[i] = byte(i ^ 0x5a)
	}
	return []*tensor.Tensor{
		{Name: "token_embd.weight", Codec: tensor.F32, Shape: []int{3, 5}, Data: f32},
		{Name: "output_norm.weight", Codec: tensor.F16, Shape: []int{7}, Data: make([]byte, 14)},
		{Name: "blk.0.attn_q.weight", Codec: tensor.Q8_0, Shape: []int{2, 32}, Data: q8},
		{Name: "blk.0.ffn_up.weight", Codec: tensor.Q4_K, Shape: []int{1, 256}, Data: q4k},
		{Name: "blk.0.x.weight", Codec: tensor.BF16, Shape: []int{2, 1, 3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
	}
}

func buildSample(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	keys, vals := sampleMetadata()
	for _, k := range keys {
		if err := w.AddMetadata(k, vals[k]); err != nil {
			t.Fatal(err)
		}
	}
	ts := sampleTensors()
	for _, tt := range ts {
		if err := w.AddTensor(tt.Name, tt.Codec, tt.Shape); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range ts {
		if err := w.WriteTensor(tt); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rewrite writes f again with the same metadata and tensors.
func rewrite(t testing.TB, f *File) ([]byte, error) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, k := range f.Keys {
		if err := w.AddMetadata(k, f.Metadata[k]); err != nil {
			return nil, err
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensorInfo(ti.Name, ti.Type, ti.Dims); err != nil {
			return nil, err
		}
	}
	for _, ti := range f.Tensors {
		data, err := f.RawData(ti.Name)
		if err != nil {
			return nil, err
		}
		if err := w.WriteTensorData(ti.Name, data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func TestRoundTrip(t *testing.T) {
	data := buildSample(t)
	f, err := Read(bytes.NewReader(data), int64(len(data)), "sample.gguf")
	if err != nil {
		t.Fatal(err)
	}
	keys, vals := sampleMetadata()
	if !reflect.DeepEqual(f.Keys, keys) {
		t.Errorf("keys %v, want %v", f.Keys, keys)
	}
	if !reflect.DeepEqual(f.Metadata, vals) {
		t.Errorf("metadata differs:\n got %#v\nwant %#v", f.Metadata, vals)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if len(data)%32 != 0 {
		t.Errorf("file size %d is not padded to the alignment", len(data))
	}
	for _, want := range sampleTensors() {
		got, err := f.Tensor(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tensor %s: got %+v want %+v", want.Name, got, want)
		}
	}
	if ti, _ := f.Info("blk.0.attn_q.weight"); !reflect.DeepEqual(ti.Dims, []uint64{32, 2}) || ti.Type != TypeQ8_0 {
		t.Errorf("info %+v", ti)
	}
	again, err := rewrite(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Error("rewriting the file changed its bytes")
	}
	if s, ok := f.GetString("general.architecture"); !ok || s != "llama" {
		t.Error("GetString")
	}
	if v, ok := f.GetInt("u32"); !ok || v != 4000000000 {
		t.Error("GetInt u32")
	}
	if _, ok := f.GetInt("u64"); ok {
		t.Error("GetInt accepted a uint64 beyond int64")
	}
	if v, ok := f.GetFloat("f32"); !ok || float32(v) != 1e-5 {
		t.Error("GetFloat")
	}
	if v, ok := f.GetInts("i32s"); !ok || !reflect.DeepEqual(v, []int64{1, -2, 3}) {
		t.Error("GetInts")
	}
	if n, ok := f.ArrayLen("strs"); !ok || n != 4 {
		t.Error("ArrayLen")
	}
}

func TestAlignment(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.SetAlignment(64); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := w.AddTensor(n, tensor.F32, []int{3}); err != nil {
			t.Fatal(err)
		}
	}
	w.WriteTensorData("a", make([]byte, 12))
	w.WriteTensorData("b", []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "x")
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 || buf.Len()%64 != 0 {
		t.Errorf("alignment %d data %d offset %d size %d", f.Alignment, f.DataOffset, f.Tensors[1].Offset, buf.Len())
	}
	if v, _ := f.Metadata["general.alignment"].(uint32); v != 64 {
		t.Errorf("general.alignment = %v", f.Metadata["general.alignment"])
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	if err := w.AddMetadata("x", 3); err == nil {
		t.Error("plain int accepted")
	}
	if err := w.AddMetadata("x", []any{int32(1)}); err == nil {
		t.Error("nested array of scalars accepted")
	}
	if err := w.AddMetadata("general.alignment", uint32(3)); err == nil {
		t.Error("alignment 3 accepted")
	}
	w.AddMetadata("k", "v")
	if err := w.AddMetadata("k", "v"); err == nil {
		t.Error("duplicate key accepted")
	}
	if err := w.AddTensor(strings.Repeat("n", 64), tensor.F32, []int{1}); err == nil {
		t.Error("64-byte name accepted")
	}
	if err := w.AddTensor("q", tensor.Q8_0, []int{2, 31}); err == nil {
		t.Error("partial block accepted")
	}
	w.AddTensor("a", tensor.F32, []int{2})
	w.AddTensor("b", tensor.F32, []int{2})
	if err := w.WriteTensorData("b", make([]byte, 8)); err == nil {
		t.Error("out of order write accepted")
	}
	if err := w.WriteTensorData("a", make([]byte, 4)); err == nil {
		t.Error("short data accepted")
	}
	w.WriteTensorData("a", make([]byte, 8))
	if err := w.Close(); err == nil {
		t.Error("close with a missing tensor accepted")
	}
}

func TestStories260K(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if runtime.GOOS == "linux" && !f.Mapped() {
		t.Error("not memory-mapped on linux")
	}
	if n, _ := f.GetInt("llama.block_count"); n != 5 {
		t.Errorf("block_count %d", n)
	}
	if toks, _ := f.GetStrings("tokenizer.ggml.tokens"); len(toks) != 512 || toks[1] != "<s>" {
		t.Errorf("tokens: %d", len(toks))
	}
	emb, err := f.Tensor("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(emb.Shape, []int{512, 64}) || emb.Codec != tensor.F32 || len(emb.Data) != 512*64*4 {
		t.Errorf("token_embd: %v %v %d", emb.Shape, emb.Codec, len(emb.Data))
	}
	q, _ := f.Tensor("blk.0.attn_k.weight")
	if !reflect.DeepEqual(q.Shape, []int{32, 64}) {
		t.Errorf("attn_k shape %v", q.Shape)
	}
	// Read through a plain ReaderAt: same bytes.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Read(bytes.NewReader(raw), int64(len(raw)), path)
	if err != nil {
		t.Fatal(err)
	}
	emb2, err := g.Tensor("token_embd.weight")
	if err != nil || !bytes.Equal(emb2.Data, emb.Data) {
		t.Errorf("ReaderAt tensor differs: %v", err)
	}
	again, err := rewrite(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Errorf("rewrite differs from llama.cpp's file: %d vs %d bytes", len(again), len(raw))
	}
}

func TestVocabOnlyFiles(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(fixtures.Dir(t), "fixtures", "llama-cpp-vocab", "*.gguf"))
	if len(paths) == 0 {
		t.Skip("no vocabulary files")
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Read(bytes.NewReader(raw), int64(len(raw)), p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		again, err := rewrite(t, f)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if !bytes.Equal(again, raw) {
			t.Errorf("%s: rewrite differs (%d vs %d bytes)", p, len(again), len(raw))
		}
	}
}

func TestUnsupportedType(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	// Q8_K is ggml's activation type: a known layout no file's weight uses.
	w.AddTensorInfo("blk.0.ffn_down.weight", TypeQ8_K, []uint64{256, 2})
	w.WriteTensorData("blk.0.ffn_down.weight", make([]byte, 2*292))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "q8k.gguf")
	if err != nil {
		t.Fatalf("a file with a Q8_K tensor must open: %v", err)
	}
	_, err = f.Tensor("blk.0.ffn_down.weight")
	if err == nil || !strings.Contains(err.Error(), "unsupported tensor type Q8_K") || !strings.Contains(err.Error(), "blk.0.ffn_down.weight") {
		t.Errorf("error %v", err)
	}
	if raw, err := f.RawData("blk.0.ffn_down.weight"); err != nil || len(raw) != 584 {
		t.Errorf("RawData: %d %v", len(raw), err)
	}
}

// TestTruncated cuts the sample at every offset: each prefix that loses
// tensor data or header bytes must fail cleanly.
func TestTruncated(t *testing.T) {
	data := buildSample(t)
	f, _ := Read(bytes.NewReader(data), int64(len(data)), "")
	last := f.Tensors[len(f.Tensors)-1]
	need := f.DataOffset + int64(last.Offset) + last.ByteLen()
	for n := range len(data) {
		_, err := Read(bytes.NewReader(data[:n]), int64(n), "cut.gguf")
		if int64(n) < need && err == nil {
			t.Fatalf("truncated at %d: no error", n)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "gguf: cut.gguf: ") {
			t.Fatalf("truncated at %d: error %q does not name the file", n, err)
		}
	}
}

// header returns a minimal header with the given counts followed by body.
func header(version uint32, nt, nkv uint64, body ...[]byte) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nt)
	b = binary.LittleEndian.AppendUint64(b, nkv)
	for _, x := range body {
		b = append(b, x...)
	}
	return append(b, make([]byte, 64)...)
}

func gstr(s string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...)
}

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func tinfo(name string, typ GGMLType, off uint64, dims ...uint64) []byte {
	b := gstr(name)
	b = append(b, u32(uint32(len(dims)))...)
	for _, d := range dims {
		b = append(b, u64(d)...)
	}
	b = append(b, u32(uint32(typ))...)
	return append(b, u64(off)...)
}

func TestHostile(t *testing.T) {
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"magic", "not a GGUF file", []byte("GGUG\x03\x00\x00\x00")},
		{"v1", "version 1", header(1, 0, 0)},
		{"big-endian", "big-endian", header(0x03000000, 0, 0)},
		{"v9", "unknown GGUF version 9", header(9, 0, 0)},
		{"tensor count", "tensor count", header(3, 1<<60, 0)},
		{"kv count", "metadata count", header(3, 0, math.MaxUint64)},
		{"key length", "beyond end of file", header(3, 0, 1, u64(1<<62))},
		{"value type", "unknown value type 13", header(3, 0, 1, gstr("k"), u32(13))},
		{"array length", "does not fit", header(3, 0, 1, gstr("k"), u32(9), u32(4), u64(1<<40))},
		{"string array length", "does not fit", header(3, 0, 1, gstr("k"), u32(9), u32(8), u64(1<<59))},
		{"array elem type", "unknown array element type", header(3, 0, 1, gstr("k"), u32(9), u32(99), u64(1))},
		{"nesting", "nested deeper", header(3, 0, 1, gstr("k"), u32(9), bytes.Repeat(append(u32(9), u64(1)...), 20))},
		{"bool", "bool byte", header(3, 0, 1, gstr("k"), u32(7), []byte{2})},
		{"dup key", "duplicate key", header(3, 0, 2, gstr("k"), u32(0), []byte{1}, gstr("k"), u32(0), []byte{1})},
		{"alignment", "power of two", header(3, 0, 1, gstr("general.alignment"), u32(4), u32(48))},
		{"alignment zero", "power of two", header(3, 0, 1, gstr("general.alignment"), u32(4), u32(0))},
		{"alignment type", "power of two", header(3, 0, 1, gstr("general.alignment"), u32(8), gstr("32"))},
		{"n_dims", "dimensions", header(3, 1, 0, gstr("t"), u32(5))},
		{"ggml type", "unknown ggml type 4", header(3, 1, 0, tinfo("t", 4, 0, 32))},
		{"dims product", "more data than the file holds", header(3, 1, 0, tinfo("t", TypeF32, 0, 1<<20, 1<<20, 1<<20, 1<<20))},
		{"huge dim", "at most 2^40", header(3, 1, 0, tinfo("t", TypeF32, 0, 0, math.MaxUint64))},
		{"block", "not a multiple", header(3, 1, 0, tinfo("t", TypeQ8_0, 0, 33))},
		{"offset align", "not a multiple of the alignment", header(3, 1, 0, tinfo("t", TypeF32, 4, 1))},
		{"beyond", "data offset 0 (at file offset ", header(3, 1, 0, tinfo("t", TypeF32, 0, 20))},
		{"huge offset", "data offset 9223372036854775808 (past any file offset, 4 bytes long) is beyond the end of the file (size ", header(3, 1, 0, tinfo("t", TypeF32, 1<<63, 1))},
		// The data offset plus the data's start wraps around 2^64: the
		// error must not report a range inside the file.
		{"wrapping offset", "data offset 18446744073709551584 (past any file offset, 4 bytes long) is beyond the end of the file", header(3, 1, 0, tinfo("t", TypeF32, math.MaxUint64-31, 1))},
		{"offset plus size", "is beyond the end of the file (size ", header(3, 1, 0, tinfo("t", TypeF32, 64, 8))},
		{"overlap", "overlaps", header(3, 2, 0, tinfo("a", TypeF32, 0, 8), tinfo("b", TypeF32, 0, 8))},
		{"dup tensor", "duplicate name", header(3, 2, 0, tinfo("a", TypeF32, 0, 1), tinfo("a", TypeF32, 32, 1))},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(c.data), int64(len(c.data)), "bad.gguf")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.gguf") {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty.gguf") {
		t.Errorf("empty file: %v", err)
	}
	p := filepath.Join(dir, "ok.gguf")
	w, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w.AddMetadata("general.architecture", "llama")
	w.AddTensor("a", tensor.F32, []int{2})
	w.WriteTensorData("a", []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Tensor("a")
	if err != nil || a.Data[3] != 0x3f {
		t.Fatalf("%v %v", a, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Tensor("a"); err == nil {
		t.Error("tensor read after Close")
	}
}

func TestVersion2(t *testing.T) {
	data := bytes.Clone(buildSample(t))
	binary.LittleEndian.PutUint32(data[4:], 2)
	f, err := Read(bytes.NewReader(data), int64(len(data)), "v2.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != len(sampleTensors()) {
		t.Errorf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
}

package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

func sharedDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Join(filepath.Dir(file), "..", "..", "shared")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("shared fixtures not found at %s", d)
	}
	return d
}

func f32Tensor(name string, shape []int, vals ...float32) *tensor.Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return &tensor.Tensor{Name: name, Codec: tensor.F32, Shape: shape, Data: b}
}

func TestRoundTrip(t *testing.T) {
	ts := []*tensor.Tensor{
		f32Tensor("b", []int{2, 2}, 1, 2, 3, 4),
		{Name: "a", Codec: tensor.BF16, Shape: []int{3}, Data: []byte{0x80, 0x3f, 0, 0x40, 0x40, 0x40}},
		{Name: "h", Codec: tensor.F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x01, 0x00}},
		{Name: "s", Codec: tensor.F32, Shape: []int{}, Data: []byte{0, 0, 0x80, 0x3f}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, ts); err != nil {
		t.Fatal(err)
	}
	if (binary.LittleEndian.Uint64(buf.Bytes())+8)%8 != 0 {
		t.Errorf("data area not 8-byte aligned")
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format = %q", got)
	}
	for _, want := range ts {
		got, err := f.Tensor(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Codec != want.Codec || !bytes.Equal(got.Data, want.Data) || len(got.Shape) != len(want.Shape) {
			t.Errorf("%s: got %v %v %x, want %v %v %x", want.Name, got.Codec, got.Shape, got.Data, want.Codec, want.Shape, want.Data)
		}
	}
	v, _ := f.Float32s("a")
	if v[0] != 1 || v[1] != 2 || v[2] != 3 {
		t.Errorf("bf16 decode = %v", v)
	}
	h, _ := f.Float32s("h")
	if h[0] != 1 || h[1] != float32(math.Ldexp(1, -24)) {
		t.Errorf("f16 decode = %v", h)
	}
	// Through a file: the mmap path.
	p := filepath.Join(t.TempDir(), "x.safetensors")
	os.WriteFile(p, buf.Bytes(), 0o644)
	mf, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	b, _ := mf.Float32s("b")
	if b[3] != 4 {
		t.Errorf("mmap decode = %v", b)
	}
}

func TestReference(t *testing.T) {
	p := filepath.Join(sharedDir(t), "fixtures", "tiny", "llama", "reference.safetensors")
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids, err := f.Int64s("input_ids")
	if err != nil || len(ids) != 24 {
		t.Fatalf("input_ids: %v %v", ids, err)
	}
	in, _ := f.Info("logits")
	if in.DType != F32 || len(in.Shape) != 2 || in.Shape[0] != 24 {
		t.Errorf("logits info %+v", in)
	}
}

func header(h string, data int) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.WriteString(h)
	b.Write(make([]byte, data))
	return b.Bytes()
}

func TestHostile(t *testing.T) {
	cases := map[string][]byte{
		"short":       {1, 2, 3},
		"hugeheader":  append(binary.LittleEndian.AppendUint64(nil, 1<<62), '{', '}'),
		"pasteof":     append(binary.LittleEndian.AppendUint64(nil, 100), '{', '}'),
		"notjson":     header("{nope", 0),
		"baddtype":    header(`{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}}`, 4),
		"outside":     header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4),
		"mismatch":    header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8),
		"negdim":      header(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 8),
		"overlap":     header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8),
		"reversed":    header(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 8),
		"hugeshape":   header(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 8),
		"badoffsets":  header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, 8),
		"badmetadata": header(`{"__metadata__":{"a":1}}`, 0),
		"array":       header(`[1]`, 0),
		"shapetype":   header(`{"a":{"dtype":"F32","shape":"x","data_offsets":[0,4]}}`, 8),
		"entrytype":   header(`{"a":3}`, 8),
		"mdtype":      header(`{"__metadata__":{"a":1}}`, 8),
	}
	for name, b := range cases {
		if _, err := Read(bytes.NewReader(b), int64(len(b)), name); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %q does not name the file", name, err)
		} else if strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "rawEntry") {
			t.Errorf("%s: error %q prints Go internals", name, err)
		}
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ts ...*tensor.Tensor) {
		var buf bytes.Buffer
		if err := Write(&buf, ts); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
	}
	write("model-00001-of-00002.safetensors", f32Tensor("x", []int{1}, 1))
	write("model-00002-of-00002.safetensors", f32Tensor("y", []int{1}, 2))
	os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"metadata":{},"weight_map":{"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"}}`), 0o644)
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.Names(); len(n) != 2 {
		t.Errorf("names %v", n)
	}
	y, err := s.Tensor("y")
	if err != nil || math.Float32frombits(binary.LittleEndian.Uint32(y.Data)) != 2 {
		t.Errorf("y = %v %v", y, err)
	}
	os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map":{"x":"../etc/passwd"}}`), 0o644)
	if _, err := OpenDir(dir); err == nil {
		t.Errorf("path traversal accepted")
	}
	os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map":{"z":"model-00001-of-00002.safetensors"}}`), 0o644)
	if _, err := OpenDir(dir); err == nil {
		t.Errorf("missing tensor accepted")
	}
}

func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, []*tensor.Tensor{f32Tensor("a", []int{2}, 1, 2), {Name: "b", Codec: tensor.BF16, Shape: []int{1}, Data: []byte{0, 0}}})
	f.Add(buf.Bytes())
	f.Add(header(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	f.Add(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8))
	f.Add(header(`{"__metadata__":{"format":"pt"}}`, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := Read(bytes.NewReader(b), int64(len(b)), "fuzz")
		if err != nil {
			return
		}
		for _, n := range sf.Names() {
			in, _ := sf.Info(n)
			data, err := sf.Bytes(n)
			if err != nil || int64(len(data)) != in.End-in.Begin {
				t.Fatalf("%s: %d bytes, %v", n, len(data), err)
			}
			sf.Float32s(n)
			sf.Int64s(n)
			sf.Tensor(n)
		}
	})
}

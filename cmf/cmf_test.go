package cmf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

func sampleMeta() *Metadata {
	return &Metadata{
		Arch: model.Arch{
			Family: "llama", Vocab: 8, Hidden: 4, Context: 16, NormEps: 1e-5, Norm: model.NormRMS,
			Act: model.ActSiLU, EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: 1, EOS: []int{2},
			Layers: []model.Layer{{
				Mixer: model.MixerAttention, FFN: model.FFNDense, FFNHidden: 8, PreMixerNorm: true, PreFFNNorm: true,
				Attn: &model.Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 0.70710677,
					Rope: model.Rope{Theta: 10000, Dims: 2, Style: model.RopeInterleaved}},
			}},
		},
		Tokenizer:  &model.TokenizerData{Kind: "gguf", Files: map[string][]byte{"gguf_vocab.json": []byte(`{"tokenizer.ggml.model":"llama"}`)}},
		Provenance: model.Provenance{Format: "gguf", Files: []model.SourceFile{{Name: "x.gguf", Size: 10, SHA256: "ab"}}},
		CreatedBy:  "test",
	}
}

func sampleTensors() []*tensor.Tensor {
	mk := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)*seed + 1
		}
		return b
	}
	return []*tensor.Tensor{
		{Name: "token_embd.weight", Codec: tensor.F32, Shape: []int{8, 4}, Data: mk(128, 3)},
		{Name: "output_norm.weight", Codec: tensor.F16, Shape: []int{4}, Data: mk(8, 5)},
		{Name: "blk.0.attn_q.weight", Codec: tensor.Q8_0, Shape: []int{3, 64}, Data: mk(3*2*34, 7)},
		{Name: "blk.0.ffn_up.weight", Codec: tensor.Q6_K, Shape: []int{1, 256}, Data: mk(210, 11)},
		{Name: "empty", Codec: tensor.F32, Shape: []int{0, 4}, Data: []byte{}},
		{Name: "ids", Codec: tensor.I32, Shape: []int{2}, Data: mk(8, 13)},
		// A codec with a side field: rows, then the column field.
		{Name: "blk.0.ffn_gate.weight", Codec: tensor.Q8_2F, Shape: []int{2, 64}, Data: mk(2*66, 17), Side: mk(2*64, 19)},
		// Binary low-rank: no rows, two q1 factors of rank 32.
		{Name: "blk.0.ffn_down.weight", Codec: tensor.BLR, Shape: []int{8, 32}, Data: []byte{}, Side: mk(6*(8+32), 23)},
	}
}

func buildSample(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sampleMeta())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range sampleTensors() {
		if err := w.WriteTensor(tt); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func rewrite(t testing.TB, f *File) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, &f.Meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range f.Names() {
		tt, err := f.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensor(tt); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := buildSample(t)
	f, err := Read(bytes.NewReader(data), int64(len(data)), "sample.cmf")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&f.Meta, sampleMeta()) {
		t.Errorf("metadata:\n got %+v\nwant %+v", f.Meta, sampleMeta())
	}
	for _, want := range sampleTensors() {
		got, err := f.Tensor(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Codec != want.Codec || !reflect.DeepEqual(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Side, want.Side) {
			t.Errorf("tensor %s: got %v %v %d bytes, %d of side", want.Name, got.Codec, got.Shape, len(got.Data), len(got.Side))
		}
		if e, _ := f.Entry(want.Name); e.Offset%Alignment != 0 {
			t.Errorf("tensor %s at unaligned offset %d", want.Name, e.Offset)
		}
	}
	if err := f.Verify(); err != nil {
		t.Error(err)
	}
	if again := rewrite(t, f); !bytes.Equal(again, data) {
		t.Error("rewriting changed the bytes")
	}
}

func TestOpenMapped(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.cmf")
	w, err := Create(p, sampleMeta())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range sampleTensors() {
		if err := w.WriteTensor(tt); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && !f.Mapped() {
		t.Error("not mapped on linux")
	}
	if err := f.Verify(); err != nil {
		t.Error(err)
	}
	raw, _ := os.ReadFile(p)
	if !bytes.Equal(rewrite(t, f), raw) {
		t.Error("rewrite of mapped file differs")
	}
	f.Close()
	if _, err := f.Tensor("ids"); err == nil {
		t.Error("tensor read after Close")
	}
	if _, err := Open(filepath.Join(dir, "missing.cmf")); err == nil {
		t.Error("missing file opened")
	}
}

func TestChecksumMismatch(t *testing.T) {
	data := buildSample(t)
	f, _ := Read(bytes.NewReader(data), int64(len(data)), "x")
	e, _ := f.Entry("blk.0.attn_q.weight")
	bad := bytes.Clone(data)
	bad[e.Offset+5] ^= 1
	g, err := Read(bytes.NewReader(bad), int64(len(bad)), "bad.cmf")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.VerifyTensor("token_embd.weight"); err != nil {
		t.Error(err)
	}
	err = g.VerifyTensor("blk.0.attn_q.weight")
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), "blk.0.attn_q.weight") {
		t.Errorf("VerifyTensor: %v", err)
	}
	if err := g.Verify(); err == nil {
		t.Error("Verify passed")
	}
}

func TestTruncated(t *testing.T) {
	data := buildSample(t)
	for n := range len(data) {
		_, err := Read(bytes.NewReader(data[:n]), int64(n), "cut.cmf")
		if err == nil {
			t.Fatalf("truncated at %d: no error", n)
		}
		if !strings.HasPrefix(err.Error(), "cmf: cut.cmf: ") {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
}

// Every single-bit flip outside tensor data must be caught at open (tensor
// data flips by Verify).
func TestBitFlips(t *testing.T) {
	data := buildSample(t)
	f, _ := Read(bytes.NewReader(data), int64(len(data)), "x")
	inData := func(off int64) bool {
		for _, e := range f.Tensors {
			if off >= e.Offset && off < e.Offset+e.Length {
				return true
			}
		}
		return false
	}
	bad := bytes.Clone(data)
	for off := range int64(len(data)) {
		for bit := range 8 {
			bad[off] ^= 1 << bit
			g, err := Read(bytes.NewReader(bad), int64(len(bad)), "flip.cmf")
			if err == nil {
				if inData(off) {
					if g.Verify() == nil {
						t.Fatalf("flip at %d bit %d in tensor data not caught by Verify", off, bit)
					}
				} else if !isPadding(f, off) {
					t.Fatalf("flip at %d bit %d not caught", off, bit)
				}
			}
			bad[off] ^= 1 << bit
		}
	}
}

// isPadding reports whether off is in alignment padding, which no checksum covers.
func isPadding(f *File, off int64) bool {
	if off >= headerSize+int64(len(mustJSON(&f.Meta))) && off < f.PayloadOffset {
		return true
	}
	for _, e := range f.Tensors {
		if off >= e.Offset+e.Length && off < alignUp(e.Offset+e.Length, f.Alignment) {
			return true
		}
	}
	return false
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// rebuild writes data with a new header (patched by ph) and directory,
// with valid checksums, so that the structural checks behind them are
// exercised.
func rebuild(data []byte, ph func(h []byte), dir any) []byte {
	le := binary.LittleEndian
	out := bytes.Clone(data)
	if ph != nil {
		ph(out[:headerSize])
		le.PutUint32(out[60:], Checksum(out[:60]))
	}
	if dir != nil {
		ft := data[len(data)-footerSize:]
		dirOff := le.Uint64(ft)
		db := mustJSON(dir)
		out = append(out[:dirOff:dirOff], db...)
		var nf [footerSize]byte
		le.PutUint64(nf[0:], dirOff)
		le.PutUint64(nf[8:], uint64(len(db)))
		le.PutUint32(nf[16:], Checksum(db))
		le.PutUint32(nf[24:], Checksum(nf[:24]))
		copy(nf[28:], Magic)
		out = append(out, nf[:]...)
	}
	return out
}

func TestHostile(t *testing.T) {
	data := buildSample(t)
	f, _ := Read(bytes.NewReader(data), int64(len(data)), "x")
	var dir directory
	for _, e := range f.Tensors {
		dir.Tensors = append(dir.Tensors, entryJSON{e.Name, e.Codec.String(), e.Shape, e.Offset, e.Length, e.CRC32C})
	}
	withEntry := func(i int, mod func(e *entryJSON)) directory {
		d := directory{Tensors: append([]entryJSON(nil), dir.Tensors...)}
		mod(&d.Tensors[i])
		return d
	}
	le := binary.LittleEndian
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"short", "too short", data[:90]},
		{"magic", "not a CMF file", append([]byte("GGUF"), data[4:]...)},
		{"header crc", "header checksum", func() []byte { b := bytes.Clone(data); b[13] ^= 1; return b }()},
		{"version", "unsupported CMF version 2 (this build reads version 1)", rebuild(data, func(h []byte) { le.PutUint32(h[4:], 2) }, nil)},
		{"flags", "unknown header flags", rebuild(data, func(h []byte) { le.PutUint32(h[8:], 4) }, nil)},
		{"alignment", "alignment 48", rebuild(data, func(h []byte) { le.PutUint32(h[12:], 48) }, nil)},
		{"meta offset", "metadata offset", rebuild(data, func(h []byte) { le.PutUint64(h[16:], 0) }, nil)},
		{"meta length", "metadata [64,", rebuild(data, func(h []byte) { le.PutUint64(h[24:], 1<<62) }, nil)},
		{"meta crc", "metadata checksum", rebuild(data, func(h []byte) { h[32] ^= 1 }, nil)},
		{"payload offset", "payload offset", rebuild(data, func(h []byte) { le.PutUint64(h[40:], 64) }, nil)},
		{"footer magic", "footer magic", append(bytes.Clone(data[:len(data)-1]), 'X')},
		{"footer crc", "footer checksum", func() []byte { b := bytes.Clone(data); b[len(b)-30] ^= 1; return b }()},
		{"dir crc", "directory checksum", func() []byte { b := bytes.Clone(data); b[len(b)-footerSize-3] ^= 1; return b }()},
		{"dir json", `directory: field "tensors" holds a JSON number, want an array`, rebuild(data, nil, map[string]any{"tensors": 3})},
		{"dir entry json", `directory: field "tensors.shape" holds a JSON string, want an array`, rebuild(data, nil, map[string]any{"tensors": []any{map[string]any{"shape": "x"}}})},
		{"meta json", `metadata: field "arch.hidden" holds a JSON string, want an integer`, withMeta(t, data, `{"arch":{"hidden":"64"}}`)},
		{"meta layers", `metadata: field "arch.layers" holds a JSON object, want an array`, withMeta(t, data, `{"arch":{"layers":{}}}`)},
		{"meta syntax", `metadata: invalid JSON at byte`, withMeta(t, data, `{"arch":`)},
		{"codec", "unknown codec", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Codec = "q8_K" }))},
		{"dup", "duplicate name", rebuild(data, nil, withEntry(1, func(e *entryJSON) { e.Name = "token_embd.weight" }))},
		{"length", "needs", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Length++ }))},
		{"shape", "negative", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Shape = []int{-8, -4} }))},
		{"huge shape", "too large", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Shape = []int{1 << 40, 1 << 40, 4} }))},
		{"block", "not a multiple", rebuild(data, nil, withEntry(2, func(e *entryJSON) { e.Shape = []int{3, 63} }))},
		{"unaligned", "not aligned", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Offset += 4 }))},
		{"beyond", "outside the payload", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Offset = 1 << 40 }))},
		{"before", "outside the payload", rebuild(data, nil, withEntry(0, func(e *entryJSON) { e.Offset = 0 }))},
		{"overlap", "overlaps", rebuild(data, nil, withEntry(1, func(e *entryJSON) { e.Offset = dir.Tensors[0].Offset }))},
		{"no side", `"blk.0.ffn_gate.weight": length 132, but q8_2f [2 64] needs 260`, rebuild(data, nil, withEntry(6, func(e *entryJSON) { e.Length = 2 * 66 }))},
		{"blr rank", `"blk.0.ffn_down.weight": length 234: blr [8 32]: 234 bytes of factors are not a whole rank (240 bytes per 32)`, rebuild(data, nil, withEntry(7, func(e *entryJSON) { e.Length -= 6 }))},
		{"blr vector", `"blk.0.ffn_down.weight": length 240: a blr tensor is a matrix [out, in], not [256]`, rebuild(data, nil, withEntry(7, func(e *entryJSON) { e.Shape = []int{256} }))},
		{"side of a vector", `"blk.0.ffn_gate.weight": q8_2f [128]: tensor: a q8_2f tensor needs two or more dimensions`, rebuild(data, nil, withEntry(6, func(e *entryJSON) { e.Shape = []int{128} }))},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(c.data), int64(len(c.data)), "bad.cmf")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.cmf") {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		// Errors speak of the file, never of Go values or types.
		if err != nil && (strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "&{") || strings.Contains(err.Error(), "cmf.entryJSON")) {
			t.Errorf("%s: error %q prints Go internals", c.name, err)
		}
	}
}

// withMeta replaces data's metadata block with js (padded with spaces to
// the block's length, which it must not exceed) and fixes the checksum.
func withMeta(t *testing.T, data []byte, js string) []byte {
	le := binary.LittleEndian
	out := bytes.Clone(data)
	n := le.Uint64(out[24:])
	if uint64(len(js)) > n {
		t.Fatalf("metadata %q longer than the block (%d)", js, n)
	}
	meta := out[headerSize : headerSize+n]
	copy(meta, js)
	for i := len(js); i < len(meta); i++ {
		meta[i] = ' '
	}
	le.PutUint32(out[32:], Checksum(meta))
	le.PutUint32(out[60:], Checksum(out[:60]))
	return out
}

func TestWriterErrors(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, sampleMeta())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor(&tensor.Tensor{Name: "a", Codec: tensor.F32, Shape: []int{2}, Data: make([]byte, 4)}); err == nil {
		t.Error("short data accepted")
	}
	w.WriteTensor(&tensor.Tensor{Name: "a", Codec: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)})
	if err := w.WriteTensor(&tensor.Tensor{Name: "a", Codec: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}); err == nil {
		t.Error("duplicate accepted")
	}
	if err := w.WriteTensor(&tensor.Tensor{Name: "q", Codec: tensor.Q4_0, Shape: []int{31}, Data: make([]byte, 18)}); err == nil {
		t.Error("partial block accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("double close accepted")
	}
}

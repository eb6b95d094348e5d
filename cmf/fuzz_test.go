package cmf

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read. Whatever parses must give every
// tensor (and its checksum verdict) without panicking, and must rewrite to a
// file that parses again.
func FuzzRead(f *testing.F) {
	sample := buildSample(f)
	f.Add(sample)
	for _, n := range []int{0, 64, 96, len(sample) / 2, len(sample) - 1} {
		f.Add(sample[:n])
	}
	g, _ := Read(bytes.NewReader(sample), int64(len(sample)), "x")
	var dir directory
	for _, e := range g.Tensors {
		dir.Tensors = append(dir.Tensors, entryJSON{e.Name, e.Codec.String(), e.Shape, e.Offset, e.Length, e.CRC32C})
	}
	dir.Tensors[1].Offset = dir.Tensors[0].Offset
	f.Add(rebuild(sample, nil, dir))
	f.Add(rebuild(sample, nil, map[string]any{"tensors": []map[string]any{{"name": "a", "codec": "f32", "shape": []int{}, "offset": 0, "length": 4}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOne(t, data)
		// Checksums stop nearly every random mutation at the header; fix
		// them up so the structural checks behind them get exercised too.
		fuzzOne(t, fixChecksums(data))
	})
}

// fixChecksums recomputes every structural checksum that its (possibly
// bogus) offsets let it find.
func fixChecksums(data []byte) []byte {
	if len(data) < headerSize+footerSize {
		return data
	}
	b := bytes.Clone(data)
	le := binary.LittleEndian
	size := uint64(len(b))
	if off, n := le.Uint64(b[16:]), le.Uint64(b[24:]); off <= size && n <= size-off {
		le.PutUint32(b[32:], Checksum(b[off:off+n]))
	}
	le.PutUint32(b[60:], Checksum(b[:60]))
	ft := b[size-footerSize:]
	if off, n := le.Uint64(ft[0:]), le.Uint64(ft[8:]); off <= size && n <= size-off {
		le.PutUint32(ft[16:], Checksum(b[off:off+n]))
	}
	le.PutUint32(ft[24:], Checksum(ft[:24]))
	return b
}

func fuzzOne(t *testing.T, data []byte) {
	{
		g, err := Read(bytes.NewReader(data), int64(len(data)), "fuzz.cmf")
		if err != nil {
			return
		}
		for _, e := range g.Tensors {
			tt, err := g.Tensor(e.Name)
			if err != nil || int64(len(tt.Data)+len(tt.Side)) != e.Length {
				t.Fatalf("tensor %q listed but unreadable: %v", e.Name, err)
			}
			g.VerifyTensor(e.Name)
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, &g.Meta)
		if err != nil {
			return // metadata JSON can hold values that do not re-encode
		}
		for _, n := range g.Names() {
			tt, _ := g.Tensor(n)
			if err := w.WriteTensor(tt); err != nil {
				t.Fatalf("rewrite: %v", err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "again.cmf"); err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
	}
}

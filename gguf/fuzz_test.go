package gguf

import (
	"bytes"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read. Whatever parses must give every
// tensor's data without panicking and must survive a rewrite: the writer
// accepts what the reader produced, and reading that back gives the same
// header.
func FuzzRead(f *testing.F) {
	sample := buildSample(f)
	f.Add(sample)
	for _, n := range []int{0, 4, 8, 24, 40, 100, len(sample) / 2, len(sample) - 1} {
		f.Add(sample[:n])
	}
	f.Add(header(3, 1, 0, tinfo("t", TypeF32, 0, 1)))
	f.Add(header(2, 2, 1, gstr("general.alignment"), u32(4), u32(8), tinfo("a", TypeQ8_0, 0, 32), tinfo("b", TypeF32, 40, 2)))
	f.Add(header(3, 0, 1, gstr("k"), u32(9), u32(9), u64(2), u32(8), u64(1), gstr("x"), u32(4), u64(0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Read(bytes.NewReader(data), int64(len(data)), "fuzz.gguf")
		if err != nil {
			return
		}
		for _, ti := range g.Tensors {
			raw, err := g.RawData(ti.Name)
			if err != nil {
				t.Fatalf("tensor %q listed but unreadable: %v", ti.Name, err)
			}
			if int64(len(raw)) != ti.ByteLen() {
				t.Fatalf("tensor %q: %d bytes, want %d", ti.Name, len(raw), ti.ByteLen())
			}
			if tt, err := g.Tensor(ti.Name); err == nil && int64(len(tt.Data)) != ti.ByteLen() {
				t.Fatalf("tensor %q: bad data", ti.Name)
			}
		}
		again, err := rewrite(t, g)
		if err != nil {
			return // e.g. names over llama.cpp's limit
		}
		h, err := Read(bytes.NewReader(again), int64(len(again)), "again.gguf")
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if len(h.Keys) != len(g.Keys) || len(h.Tensors) != len(g.Tensors) {
			t.Fatalf("rewrite lost entries")
		}
	})
}

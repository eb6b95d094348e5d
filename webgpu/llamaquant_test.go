package webgpu

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/importer"
)

// TestLlamaQuantFiles runs the GGUF files llama.cpp's llama-quantize wrote
// with its recipes (cpu/testdata/llamaquant, scripts/make-llamaquant-files.sh;
// the CPU side of the same files is cpu.TestLlamaQuantFiles, against the
// float32 math on their dequantized weights) through the device and the
// exact CPU path: prefill and decode logits within lowbitTol. A file the
// device declines (a codec without a WGSL prelude) must decline with
// ErrUnsupported; it is skipped, naming why.
func TestLlamaQuantFiles(t *testing.T) {
	d := testDevice(t)
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	files, err := filepath.Glob(filepath.Join("..", "cpu", "testdata", "llamaquant", "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no files in ../cpu/testdata/llamaquant")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".gguf"), func(t *testing.T) {
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			gb, err := New(m, Options{Device: d, Chunk: 16})
			if errors.Is(err, ErrUnsupported) {
				t.Skipf("the device declines this file: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer gb.Close()
			cb, err := cpu.New(m, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Close()
			cs, err := cb.NewSession(32)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			gs, err := gb.NewSession(32)
			if err != nil {
				t.Fatal(err)
			}
			defer gs.Close()
			ids := []int{1, 7, 200, 42, 255, 2, 99, 3, 250, 17}
			want, err := cs.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gs.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			vocab := m.Arch.Vocab
			checkRows(t, "prefill", got, want, vocab, lowbitTol)
			for _, tok := range []int{5, 6, 300} {
				want, err := cs.Forward([]int{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				got, err := gs.Forward([]int{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				checkRows(t, "decode", got, want, vocab, lowbitTol)
			}
		})
	}
}

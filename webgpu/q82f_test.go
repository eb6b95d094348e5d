package webgpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestParityQ82F runs q8_2f CMF files (`cortiq import --quant q8_2f`) on
// the device next to the CPU's exact kernels: a dense llama whose fused
// q/k/v join three column fields in one weight, and a routed-expert model
// whose banks carry one field per expert; each memory-mapped and read
// unmapped (lazy weights, as in the browser). Prefill and decode logits
// within lowbitTol, weights held on the device as q8_2f.
func TestParityQ82F(t *testing.T) {
	d := testDevice(t)
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	dir := t.TempDir()
	dense := synth.Shape{Name: "k", Arch: "llama", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 192,
		Vocab: 256, RopeTheta: 10000, Context: 64}
	moe := dense
	moe.FFN, moe.Experts, moe.ExpertsUsed = 64, 4, 2
	for _, sh := range []struct {
		name  string
		shape synth.Shape
	}{{"dense", dense}, {"moe", moe}} {
		src := filepath.Join(dir, sh.name+".gguf")
		if err := synth.Write(src, sh.shape, tensor.F32); err != nil {
			t.Fatal(err)
		}
		f, err := importer.Open(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, sh.name+".cmf")
		err = writer.SaveCMF(f, path, writer.SaveOptions{Quant: tensor.Q8_2F})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, mapped := range []bool{true, false} {
			label := sh.name + "/mapped"
			if !mapped {
				label = sh.name + "/unmapped"
			}
			t.Run(label, func(t *testing.T) {
				var m *model.Model
				if mapped {
					if m, err = importer.FromCMF(path); err != nil {
						t.Fatal(err)
					}
				} else {
					fd, err := os.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer fd.Close()
					st, _ := fd.Stat()
					cf, err := cmf.Read(fd, st.Size(), path)
					if err != nil {
						t.Fatal(err)
					}
					if m, err = importer.FromCMFFile(cf); err != nil {
						t.Fatal(err)
					}
				}
				defer m.Close()
				cb, err := cpu.New(m, cpu.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer cb.Close()
				gb, err := New(m, Options{Device: d, Chunk: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer gb.Close()
				if gb.emb.codec != tensor.Q8_2F {
					t.Fatalf("device holds the embedding as %s", gb.emb.codec)
				}
				cs, err := cb.NewSession(32)
				if err != nil {
					t.Fatal(err)
				}
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
				checkRows(t, "prefill", got, want, sh.shape.Vocab, lowbitTol)
				for _, tok := range []int{5, 6} {
					if want, err = cs.Forward([]int{tok}, false); err != nil {
						t.Fatal(err)
					}
					if got, err = gs.Forward([]int{tok}, false); err != nil {
						t.Fatal(err)
					}
					checkRows(t, "decode", got, want, sh.shape.Vocab, lowbitTol)
				}
			})
		}
	}
}

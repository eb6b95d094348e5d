package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/safetensors"
)

// TestHFUnmapped imports every tiny fixture from a safetensors file read
// through a plain io.ReaderAt (as where nothing is mapped): the weights are
// lazyWeights, and every tensor, whole or in row ranges, has the bytes of
// the mapped import.
func TestHFUnmapped(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(hfSharedDir(t), "fixtures", "tiny", "*"))
	inRepo, _ := filepath.Glob(filepath.Join("..", "fixtures", "testdata", "tiny", "*")) // gpt-oss
	for _, dir := range append(dirs, inRepo...) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref, err := FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			fd, err := os.Open(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer fd.Close()
			st, _ := fd.Stat()
			f, err := safetensors.Read(fd, st.Size(), fd.Name())
			if err != nil {
				t.Fatal(err)
			}
			set, err := safetensors.NewSet(f)
			if err != nil {
				t.Fatal(err)
			}
			if set.Mapped() {
				t.Fatal("a set read through *os.File reports mapped")
			}
			b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			cfg, err := hfParseConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			arch, err := hfArch(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			w, err := hfWeights(&cfg, &arch, set)
			if err != nil {
				t.Fatal(err)
			}
			rr, ok := w.(model.RangeReader)
			if !ok {
				t.Fatalf("unmapped weights are %T, not a RangeReader", w)
			}
			for _, n := range ref.Weights.Names() {
				want, _ := ref.Weights.Tensor(n)
				got, ok := w.Tensor(n)
				if !ok || got.Codec != want.Codec || !bytes.Equal(got.Data, want.Data) {
					t.Fatalf("%s differs from the mapped import (err %v)", n, model.WeightsErr(w))
				}
				if len(want.Shape) == 2 && want.Shape[0] > 1 {
					rb := len(want.Data) / want.Shape[0]
					dst := make([]byte, rb)
					if err := rr.ReadTensorRows(n, 1, 1, dst); err != nil || !bytes.Equal(dst, want.Data[rb:2*rb]) {
						t.Fatalf("%s: row 1 differs (%v)", n, err)
					}
				}
			}
		})
	}
}

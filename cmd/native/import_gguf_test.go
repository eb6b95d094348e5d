package main

import (
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestCLIImportGGUF: `cortiq import HF -o x.gguf` writes a file whose logits
// are the HF import's (and the reference's, within TestCLIParity's 1e-4),
// for a family llama.cpp permutes (llama), one it keeps in rotate-half
// layout (qwen3) and one it fuses (phi3); with --quant f16 the GGUF file
// computes what the f16 CMF import computes. (A block codec would be
// compared through the CPU's int8 activations, where the float-order
// differences of llama's permuted rows may flip a rounding; the codecs
// themselves are TestSaveGGUFQuant's.)
func TestCLIImportGGUF(t *testing.T) {
	root := fixtures.Dir(t)
	for _, arch := range []string{"llama", "qwen3", "phi3"} {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(root, "fixtures", "tiny", arch)
			ref := fixtures.LoadReference(t, dir)
			tmp := t.TempDir()
			logits := func(src string) []float32 {
				out := filepath.Join(tmp, "logits.safetensors")
				cortiq(t, []string{"CORTIQ_CACHE=" + tmp}, "logits", "-m", src, "--backend", "cpu", "--ids", idList(ref.InputIDs), "-o", out)
				return readLogits(t, out)
			}
			g := filepath.Join(tmp, arch+".gguf")
			cortiq(t, nil, "import", dir, "-o", g)
			hf, gl := logits(dir), logits(g)
			if d := maxAbsDiff(gl, hf); d > 1e-4 {
				t.Errorf("GGUF logits differ from the HF import's by %.3g (> 1e-4)", d)
			}
			if d := maxAbsDiff(gl, ref.Logits); d > 1e-4 {
				t.Errorf("GGUF logits differ from the reference by %.3g (> 1e-4)", d)
			}

			hg, hc := filepath.Join(tmp, "f16.gguf"), filepath.Join(tmp, "f16.cmf")
			cortiq(t, nil, "import", dir, "-o", hg, "--quant", "f16")
			cortiq(t, nil, "import", dir, "-o", hc, "--quant", "f16")
			if d := maxAbsDiff(logits(hg), logits(hc)); d > 1e-4 {
				t.Errorf("f16 GGUF logits differ from the f16 CMF import's by %.3g (> 1e-4)", d)
			}
		})
	}
}

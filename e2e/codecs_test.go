package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// TestPlaneCodecs: a tiny synthetic llama in iq4_xs (its code book in
// workgroup memory: codec_init's barrier under the browser's uniformity
// rules) and in tq1_0 (base-3 digits a word at a time) greedy-decodes the
// same tokens on WebGPU (SwiftShader) as on the CPU engine in the page.
func TestPlaneCodecs(t *testing.T) {
	needBrowser(t)
	dir := t.TempDir()
	shape := synth.Shape{Name: "k", Arch: "llama", Hidden: 256, Layers: 1, Heads: 4, KVHeads: 2, FFN: 256,
		Vocab: 256, RopeTheta: 10000, Context: 64}
	for _, c := range []tensor.Codec{tensor.IQ4_XS, tensor.TQ1_0} {
		p := filepath.Join(dir, c.String()+".gguf")
		if err := synth.Write(p, shape, c); err != nil {
			t.Fatal(err)
		}
		srv := newServer(t, map[string]string{"m": p})
		var ids [][]int
		for _, gpu := range []bool{true, false} {
			b := newBrowser(t, gpu, "")
			b.open(srv.url() + "/")
			info := b.mustLoad("m", "", 2*time.Minute)
			res := b.generate(map[string]any{"prompt": "a b c", "maxTokens": 8, "temperature": 0}, 3*time.Minute)
			t.Logf("%s: backend %s (device error %q), ids %v", c, res.Backend, info.DeviceError, res.IDs)
			if gpu && !strings.HasPrefix(res.Backend, "webgpu") {
				t.Fatalf("%s: generation ran on %q with WebGPU (device error %q)", c, res.Backend, info.DeviceError)
			}
			if len(res.IDs) != 8 {
				t.Fatalf("%s: %d tokens, want 8 (finish %s)", c, len(res.IDs), res.FinishReason)
			}
			ids = append(ids, res.IDs)
		}
		if !equalInts(ids[0], ids[1]) {
			t.Errorf("%s: greedy tokens %v on WebGPU, %v on the CPU", c, ids[0], ids[1])
		}
	}
}

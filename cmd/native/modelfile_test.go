package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// cortiqFails runs the binary, expects a non-zero exit, and returns stderr.
func cortiqFails(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(cortiqBin, args...)
	cmd.Env = append(os.Environ(), "CORTIQ_CACHE="+t.TempDir(), "CORTIQ_MODEL_PATH=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("cortiq %s: %v (want a failure)\nstdout %s\nstderr %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stderr.String()
}

// tinyModel writes the synthetic tiny model to dir as GGUF and CMF.
func tinyModel(t *testing.T, dir string) (ggufPath, cmfPath string) {
	t.Helper()
	ggufPath = filepath.Join(dir, "tiny.gguf")
	s, _ := synth.ParseShape("tiny")
	if err := synth.Write(ggufPath, s, tensor.Q8_0); err != nil {
		t.Fatal(err)
	}
	m, err := importer.FromGGUF(ggufPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cmfPath = filepath.Join(dir, "tiny.cmf")
	if err := writer.SaveCMF(m, cmfPath, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	return ggufPath, cmfPath
}

// A flipped byte in a CMF tensor makes info and run fail naming the tensor.
func TestCLIDamagedCMF(t *testing.T) {
	_, p := tinyModel(t, t.TempDir())
	const victim = "blk.0.attn_v.weight"
	f, err := cmf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := f.Entry(victim)
	off := e.Offset + 3
	f.Close()
	raw, _ := os.ReadFile(p)
	raw[off] ^= 0x10
	os.WriteFile(p, raw, 0o644)
	for _, args := range [][]string{
		{"info", "-m", p},
		{"run", "-m", p, "-p", "a b", "-n", "2", "--temp", "0", "--backend", "cpu"},
	} {
		stderr := cortiqFails(t, args...)
		if !strings.Contains(stderr, victim) || !strings.Contains(stderr, "checksum mismatch") {
			t.Errorf("cortiq %s: stderr %q does not name the damaged tensor %s", args[0], stderr, victim)
		}
	}
}

// Paths that are not models: a readable file that is no model (whose bytes
// must not be echoed), a directory without config.json, a path through a
// file; a FIFO (modelfile_unix_test.go).
func TestCLINotAModel(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "shadow")
	os.WriteFile(secret, []byte("root:$6$hash:19000::::::\n"), 0o600)
	bare := filepath.Join(dir, "bare")
	os.Mkdir(bare, 0o755)
	for _, c := range []struct{ path, want string }{
		{secret, secret + ": not a model file (expected GGUF, CMF, safetensors or an HF directory)"},
		{bare, bare + ": not a model file (expected GGUF, CMF, safetensors or an HF directory)"},
		{filepath.Join(secret, "x.gguf"), filepath.Join(secret, "x.gguf") + ": no such file or directory"},
	} {
		for _, args := range [][]string{{"info"}, {"run", "-p", "a", "-n", "1"}} {
			stderr := cortiqFails(t, append(args, "-m", c.path)...)
			if !strings.Contains(stderr, c.want) || strings.Contains(stderr, "root:") || strings.Contains(stderr, "not a directory") {
				t.Errorf("cortiq %s -m %s: stderr %q, want %q", args[0], c.path, stderr, c.want)
			}
		}
	}
}

// A NaN in a weight makes run fail naming the first broken layer, on the
// CPU and through the auto backend choice, instead of printing token 0
// until the length limit and exiting 0.
func TestCLINonFiniteWeights(t *testing.T) {
	p, _ := tinyModel(t, t.TempDir())
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for _, ti := range f.Tensors {
		if ti.Name == "blk.1.ffn_norm.weight" {
			off = f.DataOffset + int64(ti.Offset)
		}
	}
	f.Close()
	if off < 0 {
		t.Fatal("no blk.1.ffn_norm.weight")
	}
	raw, _ := os.ReadFile(p)
	binary.LittleEndian.PutUint32(raw[off:], math.Float32bits(float32(math.NaN())))
	os.WriteFile(p, raw, 0o644)
	for _, backend := range []string{"cpu", "auto"} {
		stderr := cortiqFails(t, "run", "-m", p, "--ids", "1,2,3", "-n", "8", "--temp", "0", "--ignore-eos", "--backend", backend)
		if !strings.Contains(stderr, "layer 1's FFN output") {
			t.Errorf("run --backend %s: stderr %q does not name layer 1's FFN", backend, stderr)
		}
	}
}

// copyGGUF writes src to dst with metadata key set to v.
func copyGGUF(t *testing.T, src, dst, key string, v any) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := gguf.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range f.Keys {
		if k == "general.alignment" {
			continue
		}
		val := f.Metadata[k]
		if k == key {
			val = v
		}
		if err := w.AddMetadata(k, val); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensorInfo(ti.Name, ti.Type, ti.Dims); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		raw, err := f.Tensor(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensorData(ti.Name, raw.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// info refuses what run refuses: a tokenizer that does not load, numbers
// that break the forward pass.
func TestCLIInfoRefusesWhatRunRefuses(t *testing.T) {
	dir := t.TempDir()
	src, _ := tinyModel(t, dir)
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"tokenizer.ggml.model", "bogus", `tokenizer.ggml.model "bogus" is not supported`},
		{"llama.attention.layer_norm_rms_epsilon", float32(-1), "norm epsilon -1"},
	} {
		p := filepath.Join(dir, "bad.gguf")
		copyGGUF(t, src, p, c.key, c.v)
		for _, args := range [][]string{{"info"}, {"run", "--ids", "1,2", "-n", "2"}} {
			stderr := cortiqFails(t, append(args, "-m", p)...)
			if !strings.Contains(stderr, c.want) {
				t.Errorf("cortiq %s with %s = %v: stderr %q, want %q", args[0], c.key, c.v, stderr, c.want)
			}
		}
	}
	// The unmodified copy passes both.
	p := filepath.Join(dir, "good.gguf")
	copyGGUF(t, src, p, "", nil)
	cortiq(t, []string{"CORTIQ_CACHE=" + t.TempDir()}, "info", "-m", p)
}

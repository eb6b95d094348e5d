package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// tinyCMF writes the synthetic tiny model as a CMF file in dir, with edit
// applied to the file's bytes given the directory's entries.
func tinyCMF(t *testing.T, edit func(raw []byte, f *cmf.File)) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.gguf")
	s, _ := synth.ParseShape("tiny")
	if err := synth.Write(src, s, tensor.Q8_0); err != nil {
		t.Fatal(err)
	}
	m, err := importer.FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tiny.cmf")
	err = importer.SaveCMF(m, p, importer.SaveOptions{Keep: true})
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		f, err := cmf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(p)
		edit(raw, f)
		f.Close()
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// A CMF file with a damaged tensor is refused at load, naming the file and
// the tensor, on every backend choice; Check (what info uses) agrees.
func TestLoadRefusesDamagedCMF(t *testing.T) {
	const victim = "blk.1.ffn_down.weight"
	p := tinyCMF(t, func(raw []byte, f *cmf.File) {
		e, _ := f.Entry(victim)
		raw[e.Offset+7] ^= 1
	})
	for _, backend := range []string{"cpu", "auto"} {
		_, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, p, Options{Backend: backend})
		if err == nil || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("Load(%s, %s) = %v, want a checksum error naming the file and %s", p, backend, err, victim)
		}
	}
	m, err := importer.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := Check(m); err == nil || !strings.Contains(err.Error(), victim) {
		t.Fatalf("Check = %v", err)
	}
}

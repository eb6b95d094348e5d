package importer

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestOpenCachedConvertsOnce(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "shared", "fixtures", "tiny", "llama")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("fixture %s not found: %v", dir, err)
	}
	cache := t.TempDir()
	m1, err := OpenCached(context.Background(), dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	if m1.Source.Format != "cmf" && m1.Source.Format != "hf" {
		t.Logf("source format %q", m1.Source.Format)
	}
	entries, _ := os.ReadDir(filepath.Join(cache, "converted"))
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(entries))
	}
	m2, err := OpenCached(context.Background(), dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m1.Weights.Names() {
		a, _ := m1.Weights.Tensor(n)
		b, ok := m2.Weights.Tensor(n)
		if !ok || string(a.Data) != string(b.Data) {
			t.Fatalf("tensor %s differs after the cached open", n)
		}
	}
	if m1.Close != nil {
		m1.Close()
	}
	if m2.Close != nil {
		m2.Close()
	}
}

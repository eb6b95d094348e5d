package cpu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
)

// llamaQuantDir holds GGUF files written by llama.cpp's own llama-quantize
// (scripts/make-llamaquant-files.sh names the commit) with its recipes, and
// MANIFEST.tsv: per file, the tensor types llama-quantize reported.
const llamaQuantDir = "testdata/llamaquant"

// llamaQuantFile is one row of MANIFEST.tsv: a file and the count of
// tensors per ggml type that llama-quantize printed while writing it.
type llamaQuantFile struct {
	Name  string
	Types map[string]int // upper-case ggml type name → tensors
}

// readLlamaQuantManifest reads dir/MANIFEST.tsv: "file<TAB>type=n type=n…".
func readLlamaQuantManifest(t *testing.T, dir string) []llamaQuantFile {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var files []llamaQuantFile
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, types, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("MANIFEST.tsv: bad line %q", line)
		}
		lf := llamaQuantFile{Name: name, Types: map[string]int{}}
		for _, kv := range strings.Fields(types) {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if !ok || err != nil {
				t.Fatalf("MANIFEST.tsv: bad count %q for %s", kv, name)
			}
			lf.Types[strings.ToUpper(k)] += n
		}
		files = append(files, lf)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("MANIFEST.tsv lists no files")
	}
	return files
}

func formatTypes(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// TestLlamaQuantFiles opens every file llama-quantize wrote (recipes Q2_K
// … IQ1_M, TQ1_0/TQ2_0, on a 64-wide trained model where the K- and
// IQ-quants fall back, and on a 256-wide one where they apply): the GGUF and
// the imported model hold the tensor types llama-quantize printed, and the
// exact CPU path's logits equal the float32 math on the dequantized weights
// (within 1e-4, greedy tokens equal).
func TestLlamaQuantFiles(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	for _, lf := range readLlamaQuantManifest(t, llamaQuantDir) {
		t.Run(strings.TrimSuffix(lf.Name, ".gguf"), func(t *testing.T) {
			path := filepath.Join(llamaQuantDir, lf.Name)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			stored := map[string]int{}
			for _, ti := range f.Tensors {
				stored[strings.ToUpper(ti.Type.String())]++
			}
			f.Close()
			if got, want := formatTypes(stored), formatTypes(lf.Types); got != want {
				t.Fatalf("GGUF stores %s; llama-quantize reported %s", got, want)
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			imported := map[string]int{}
			for _, name := range m.Weights.Names() {
				w, _ := m.Weights.Tensor(name)
				gt, err := gguf.TypeOf(w.Codec)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				imported[strings.ToUpper(gt.String())]++
			}
			if got, want := formatTypes(imported), formatTypes(lf.Types); got != want {
				t.Errorf("imported model holds %s; llama-quantize reported %s", got, want)
			}
			twin := dequantizedTwin(t, m)
			ids := []int{1, 7, 200, 42, 255, 2, 99, 3}
			checkTwin(t, lf.Name, m, twin, ids, 8, 32)
		})
	}
}

package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInfoLlamaQuant: for every file llama.cpp's llama-quantize wrote in its
// recipes (cpu/testdata/llamaquant, scripts/make-llamaquant-files.sh),
// `cortiq info` prints the tensor count per type that llama-quantize
// printed while writing it (MANIFEST.tsv).
func TestInfoLlamaQuant(t *testing.T) {
	dir := filepath.Join("..", "..", "cpu", "testdata", "llamaquant")
	f, err := os.Open(filepath.Join(dir, "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	files := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, types, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("MANIFEST.tsv: bad line %q", line)
		}
		files++
		out := cortiq(t, nil, "info", "-m", filepath.Join(dir, name))
		total := 0
		for _, kv := range strings.Fields(types) {
			typ, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("MANIFEST.tsv: %s: bad count %q", name, kv)
			}
			total += n
			if want := fmt.Sprintf("codec       %-7s %4d tensors", typ, n); !strings.Contains(out, want) {
				t.Errorf("%s: info lacks %q (llama-quantize wrote %s):\n%s", name, want, types, out)
			}
		}
		if want := fmt.Sprintf("%d tensors\n", total); !strings.Contains(out, want) {
			t.Errorf("%s: info does not count %d tensors in all:\n%s", name, total, out)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("MANIFEST.tsv lists no files")
	}
}

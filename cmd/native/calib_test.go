package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestImportCalib: `import --quant q4tp --calib FILE` writes stories260K
// with GPTQ, the same bytes twice, every linear weight in q4tp (info's
// counts); --calib without a codec GPTQ can write is refused by name.
func TestImportCalib(t *testing.T) {
	src := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	dir := t.TempDir()
	calib := filepath.Join(dir, "calib.txt")
	if err := os.WriteFile(calib, []byte(strings.Repeat(storiesWant, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	var files [2][]byte
	for k := range files {
		p := filepath.Join(dir, "s"+string(rune('a'+k))+".cmf")
		cortiq(t, nil, "import", src, "-o", p, "--quant", "q4tp", "--calib", calib, "--act-order")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[k] = b
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("two GPTQ imports of the same file and text differ")
	}
	info := cortiq(t, nil, "info", "-m", filepath.Join(dir, "sa.cmf"))
	if !strings.Contains(info, "q4tp") {
		t.Errorf("info of the q4tp file:\n%s", info)
	}
	cmd := exec.Command(cortiqBin, "import", src, "-o", filepath.Join(dir, "x.cmf"), "--quant", "f16", "--calib", calib)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--calib") || !strings.Contains(string(out), "q4tp") {
		t.Errorf("--calib with f16: %v\n%s", err, out)
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestImportSideCodecs: `import --quant q8_2f|blr` writes stories260K with
// its matrices in the codec (info's counts; blr leaves the embedding and
// the head) and the file runs; the two codecs into a GGUF, and --calib
// with either, are refused by name.
func TestImportSideCodecs(t *testing.T) {
	src := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	dir := t.TempDir()
	calib := filepath.Join(dir, "calib.txt")
	if err := os.WriteFile(calib, []byte(storiesWant), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"q8_2f", "blr"} {
		p := filepath.Join(dir, c+".cmf")
		cortiq(t, nil, "import", src, "-o", p, "--quant", c)
		info := cortiq(t, nil, "info", "-m", p)
		if !strings.Contains(info, c+" ") {
			t.Errorf("info of the %s file:\n%s", c, info)
		}
		out := cortiq(t, nil, "run", "-m", p, "--backend", "cpu", "-n", "8", "--temp", "0", "-p", "Once upon a time")
		if len(strings.TrimSpace(out)) == 0 {
			t.Errorf("the %s file generated nothing", c)
		}
		for _, args := range [][]string{
			{"import", src, "-o", filepath.Join(dir, "x.gguf"), "--quant", c},
			{"import", src, "-o", filepath.Join(dir, "x.cmf"), "--calib", calib, "--quant", c},
		} {
			cmd := exec.Command(cortiqBin, args...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c) {
				t.Errorf("%v: %v\n%s", args, err, out)
			}
		}
	}
}

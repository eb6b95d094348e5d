package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestImportQ82F: `import --quant q8_2f` writes stories260K with every
// matrix whose rows are whole blocks in q8_2f (info's counts) and the file
// runs; `--quant blr` and q8_2f into a GGUF are refused by name.
func TestImportQ82F(t *testing.T) {
	src := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	dir := t.TempDir()
	p := filepath.Join(dir, "q82.cmf")
	cortiq(t, nil, "import", src, "-o", p, "--quant", "q8_2f")
	info := cortiq(t, nil, "info", "-m", p)
	if !strings.Contains(info, "q8_2f") {
		t.Errorf("info of the q8_2f file:\n%s", info)
	}
	out := cortiq(t, nil, "run", "-m", p, "--backend", "cpu", "-n", "8", "--temp", "0", "-p", "Once upon a time")
	if len(strings.TrimSpace(out)) == 0 {
		t.Error("the q8_2f file generated nothing")
	}
	for _, args := range [][]string{
		{"import", src, "-o", filepath.Join(dir, "x.cmf"), "--quant", "blr"},
		{"import", src, "-o", filepath.Join(dir, "x.gguf"), "--quant", "q8_2f"},
	} {
		cmd := exec.Command(cortiqBin, args...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), args[len(args)-1]) {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

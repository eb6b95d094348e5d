package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestBackendFlags: --backend takes only the registered backends, and
// --devices only CUDA device numbers; each refusal names the flag and the
// value, exits non-zero and writes nothing to stdout.
func TestBackendFlags(t *testing.T) {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not here: %v", p, err)
	}
	env := []string{"CORTIQ_CACHE=" + t.TempDir()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-m", p, "--ids", "1", "-n", "1", "--backend", "metal"}, `--backend "metal"`},
		{[]string{"run", "-m", p, "--ids", "1", "-n", "1", "--backend", "cuda", "--devices", "0,x"}, `--devices "0,x"`},
		{[]string{"run", "-m", p, "--ids", "1", "-n", "1", "--backend", "cuda", "--devices", "-1"}, `--devices "-1"`},
		{[]string{"bench", "-m", p, "--backend", "cuda", "--devices", "99999999999999999999"}, `--devices`},
	} {
		out, errOut, code := cortiqIn(t, env, "", c.args...)
		if code == 0 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a refusal naming %s", c.args, code, out, errOut, c.want)
		}
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestRunHugeMaxTokens: -n near 2^63 is clamped to the room left in the
// context and prints what it generated, exit 0 (it used to run the whole
// context and then fail, discarding the output); a context size that is
// negative or past the model's maximum is refused with a clear error.
func TestRunHugeMaxTokens(t *testing.T) {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	env := []string{"CORTIQ_CACHE=" + t.TempDir()}
	out := cortiq(t, env, "run", "-m", p, "--ids", "1,403,407", "-n", fmt.Sprint(int64(math.MaxInt64)), "--ctx", "16",
		"--temp", "0", "--ignore-eos", "--json")
	var final runFinal
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		final = runFinal{}
		if err := json.Unmarshal(sc.Bytes(), &final); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
	}
	if !final.Done || len(final.IDs) != 13 {
		t.Fatalf("-n 2^63-1 --ctx 16 after 3 prompt ids: final %+v, want 13 ids", final)
	}
	for _, ctx := range []string{"-1", "1000000000000"} {
		cmd := exec.Command(cortiqBin, "run", "-m", p, "--ids", "1", "-n", "1", "--ctx", ctx)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		// The flag check (negative) or the engine's range check names it.
		if err == nil || !strings.Contains(string(b), "--ctx "+ctx) && !strings.Contains(string(b), "context size "+ctx) {
			t.Errorf("--ctx %s: %v %s, want an error naming the context size", ctx, err, b)
		}
	}
}

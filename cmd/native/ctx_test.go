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

// TestInfoCtxMemory: `info --ctx N` prints a session's memory per backend,
// an f16 KV cache halves the KV; `run` refuses a context beyond
// --mem-budget, saying what it needs; --kv takes f32 or f16 only.
func TestInfoCtxMemory(t *testing.T) {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "gemma2_sw8")
	env := []string{"CORTIQ_CACHE=" + t.TempDir()}
	kvMiB := func(out string) map[string]float64 {
		got := map[string]float64{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[0] == "ctx" {
				var v float64
				fmt.Sscan(f[5], &v)
				got[f[2]] = v
			}
		}
		return got
	}
	// One global layer of 512 bytes a position would be 2 MiB at 4096
	// with the other layer's window ring on top; f16 halves both.
	f32 := kvMiB(cortiq(t, env, "info", "-m", p, "--ctx", "4096"))
	f16 := kvMiB(cortiq(t, env, "info", "-m", p, "--ctx", "4096", "--kv", "f16"))
	for _, be := range []string{"cpu", "webgpu"} {
		if f32[be] < 1 || f32[be] > 1.5 || math.Abs(f16[be]-f32[be]/2) > 0.01 {
			t.Errorf("KV MiB at ctx 4096 on %s: f32 %v, f16 %v", be, f32[be], f16[be])
		}
	}
	for _, args := range [][]string{
		{"run", "-m", p, "--ids", "1", "-n", "1", "--ctx", "4096", "--backend", "cpu", "--mem-budget", "1MiB"},
		{"run", "-m", p, "--ids", "1", "-n", "1", "--kv", "f8"},
	} {
		cmd := exec.Command(cortiqBin, args...)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		if err == nil || !(strings.Contains(string(b), "needs") || strings.Contains(string(b), "--kv")) {
			t.Errorf("%v: %v, %s", args, err, b)
		}
	}
}

//go:build !js

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/probe"
)

// TestDevicesVerdicts: `cortiq devices` lists the probe's verdicts of
// either file format (a two-arm verdict of an older engine marked stale),
// and --forget removes them: stale ones, by text, or all.
func TestDevicesVerdicts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.json")
	file := `{"entries":[
  {"version":"cortiq-decode-2","device":"webgpu:GPU A","class":"decode llama h64 l2 v320 f32","winner":"host"},
  {"version":"` + engine.ProbeVersion + `","device":"cuda:0:GPU A + webgpu:GPU A + cpu","class":"decode llama h2048 l16 v128256 q4_0","winner":"cuda:0:GPU A","arms":["cuda:0:GPU A","webgpu:GPU A","cpu"]},
  {"version":"` + engine.ProbeVersion + `","device":"cuda:0:GPU A + webgpu:GPU A + cpu","class":"prefill64 llama h2048 l16 v128256 q4_0","winner":"webgpu:GPU A","arms":["cuda:0:GPU A","webgpu:GPU A","cpu"]}
]}`
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CORTIQ_PROBE_CACHE=" + path}
	var out struct {
		Probe        []probe.Entry `json:"probe_verdicts"`
		ProbeCache   string        `json:"probe_cache"`
		ProbeVersion string        `json:"probe_version"`
	}
	if err := json.Unmarshal([]byte(cortiq(t, env, "devices", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Probe) != 3 || out.ProbeCache != path || out.ProbeVersion != engine.ProbeVersion || len(out.Probe[0].Arms) == 0 {
		t.Fatalf("devices --json: %+v", out)
	}
	text := cortiq(t, env, "devices")
	for _, w := range []string{
		"decode llama h64 l2 v320 f32         cpu (among webgpu:GPU A, cpu; stale: engine cortiq-decode-2)",
		"cuda:0:GPU A (among cuda:0:GPU A, webgpu:GPU A, cpu)",
		"prefill64 llama h2048 l16 v128256 q4_0 webgpu:GPU A",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("devices lacks %q:\n%s", w, text)
		}
	}
	count := func() int {
		entries, err := probe.ReadCache(path)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	cortiq(t, env, "devices", "--forget", "stale")
	if n := count(); n != 2 {
		t.Fatalf("after --forget stale: %d verdicts, want 2", n)
	}
	cortiq(t, env, "devices", "--forget", "prefill64")
	if n := count(); n != 1 {
		t.Fatalf("after --forget prefill64: %d verdicts, want 1", n)
	}
	if text := cortiq(t, env, "devices", "--forget", "all"); !strings.Contains(text, "no verdicts cached") || count() != 0 {
		t.Fatalf("after --forget all: %d verdicts\n%s", count(), text)
	}
	// No verdict file: --forget says so, non-zero.
	cmd := exec.Command(cortiqBin, "devices", "--forget", "all")
	cmd.Env = append(os.Environ(), "CORTIQ_PROBE_CACHE=off")
	if msg, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(msg), "--forget") {
		t.Errorf("--forget without a file: %v\n%s", err, msg)
	}
}

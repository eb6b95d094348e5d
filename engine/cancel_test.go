//go:build !js

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/webgpu"
)

// TestLoadCancelled cancels engine.Load (what Ctrl-C does to the CLI, a
// closed connection to the server's load, a new load to the tab) in each
// slow stage of a load on the device with --backend auto: the import with
// its HF→CMF conversion, the device's upload, the speed probe. Each stops
// with context.Canceled and leaves nothing behind: no cache entry, no
// probe verdict, no open or mapped file, no device buffer.
func TestLoadCancelled(t *testing.T) {
	needAdapter(t)
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("fixture %s not found: %v", dir, err)
	}
	var dev *gpu.Device
	webgpu.OnOpen = func(d *gpu.Device) { dev = d }
	defer func() { webgpu.OnOpen = nil }()

	type run struct {
		cache, verdicts string
		stages          map[string]int64 // check count when each stage began
	}
	load := func(ctx *fixtures.Countdown) (*Engine, run, error) {
		r := run{cache: t.TempDir(), stages: map[string]int64{}}
		r.verdicts = filepath.Join(r.cache, "probe.json")
		dev = nil
		e, err := Load(ctx, &resolve.Resolver{CacheDir: r.cache}, dir, Options{
			Backend: "auto", ProbeCache: r.verdicts, AllowSoftware: true,
			Progress: func(stage string) { r.stages[stage] = ctx.Checks() },
		})
		return e, r, err
	}

	all := fixtures.CancelAfter(context.Background(), 1<<40)
	e, r, err := load(all)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	total := all.Checks()
	upload := r.stages["opening the device, uploading the weights and building the kernels"]
	probe := r.stages["timing the device against the CPU"]
	if upload == 0 || probe <= upload || total <= probe {
		t.Fatalf("stages at checks %v of %d: want an upload, then a probe", r.stages, total)
	}
	t.Logf("checks: import 0..%d, upload ..%d, probe ..%d", upload, probe, total)
	fds, _ := fixtures.OpenFiles(t, dir)

	for _, c := range []struct {
		stage string
		at    int64
	}{
		{"import", 1},
		{"import", upload / 2},
		{"upload", upload + 1},
		{"upload", (upload + probe) / 2},
		{"probe", probe + 1},
		{"probe", (probe + total) / 2},
	} {
		ctx := fixtures.CancelAfter(context.Background(), c.at)
		e, r, err := load(ctx)
		if !errors.Is(err, context.Canceled) {
			if e != nil {
				e.Close()
			}
			t.Fatalf("cancelled in the %s (check %d): %v, want context.Canceled", c.stage, c.at, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(r.cache, "converted")); len(ents) > 0 && c.stage == "import" {
			t.Errorf("cancelled in the import (check %d): the cache holds %d entries", c.at, len(ents))
		}
		if _, err := os.Stat(r.verdicts); err == nil {
			t.Errorf("cancelled in the %s (check %d): a probe verdict was written", c.stage, c.at)
		}
		if dev != nil && dev.LiveBuffers() != 0 {
			t.Errorf("cancelled in the %s (check %d): %d device buffers left", c.stage, c.at, dev.LiveBuffers())
		}
		if c.stage != "import" && dev == nil {
			t.Errorf("cancelled in the %s (check %d): no device was opened", c.stage, c.at)
		}
		n, mapped := fixtures.OpenFiles(t, dir)
		_, cached := fixtures.OpenFiles(t, r.cache)
		if n != fds || len(mapped)+len(cached) > 0 {
			t.Errorf("cancelled in the %s (check %d): %d open files (%d before), mapped %v %v", c.stage, c.at, n, fds, mapped, cached)
		}
	}
}

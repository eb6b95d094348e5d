//go:build !js

package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/resolve"
)

// TestCPUOnDemand: the browser tab's load (CPUOnDemand, NoProbe,
// AllowSoftware, WrapWeights) keeps the CPU backend unbuilt while the
// device holds the model, builds it the first time a request asks for the
// CPU, and gives that request the CPU's own logits; without a device the
// CPU is built at load. WrapWeights sees the weights once, before any
// backend reads them.
func TestCPUOnDemand(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	load := func(opts Options) (*Engine, int) {
		wraps := 0
		opts.WrapWeights = func(w model.Weights) model.Weights { wraps++; return w }
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e, wraps
	}
	ids := []int{5, 17, 33, 101, 7}
	ref, _ := load(Options{Backend: "cpu"})
	want, err := ref.LogitsOn(context.Background(), ids, "cpu")
	if err != nil {
		t.Fatal(err)
	}

	c, wraps := load(Options{Backend: "cpu", CPUOnDemand: true})
	if c.cpu == nil || c.dev != nil || wraps != 1 {
		t.Fatalf("--backend cpu on demand: CPU built %v, device %v, weights wrapped %d times", c.cpu != nil, c.dev != nil, wraps)
	}

	e, wraps := load(Options{Backend: "auto", CPUOnDemand: true, NoProbe: true, AllowSoftware: true})
	if wraps != 1 {
		t.Errorf("weights wrapped %d times, want once", wraps)
	}
	if e.dev == nil {
		needAdapter(t)
		t.Fatalf("the device refused: %v", e.DeviceError())
	}
	if e.cpu != nil {
		t.Fatal("the CPU backend was built although the device holds the model")
	}
	got, err := e.LogitsOn(context.Background(), ids, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if e.cpu == nil || got.Backend != "cpu" || maxDiff(got.Logits, want.Logits) != 0 {
		t.Errorf("a CPU request: built %v, ran on %s, logits differ by %g", e.cpu != nil, got.Backend, maxDiff(got.Logits, want.Logits))
	}
}

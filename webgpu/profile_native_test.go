//go:build !js

package webgpu

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/shaders"
)

// TestProfiler opens a second device with CORTIQ_GPU_PROFILE's switch on,
// runs labelled dispatches and checks that the report folds the per-layer
// labels into classes with their counts, and that results are unchanged.
func TestProfiler(t *testing.T) {
	testDevice(t) // skips without an adapter
	gpuProfile = true
	d, err := Open()
	gpuProfile = false
	if err != nil {
		if errors.Is(err, ErrNoAdapter) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer func() {
		d.Close()
		if r := ProfileReport(); r != "" {
			t.Errorf("a closed device still reports:\n%s", r)
		}
	}()
	if d.prof == nil {
		t.Skip("adapter without timestamp queries")
	}
	k := &kt{t: t, d: d}
	defer func() {
		for _, b := range k.bufs {
			b.Release()
		}
	}()
	src, _ := shaders.Source(shaders.ActMul)
	p, err := d.Pipeline("act_mul", src, kindsAct)
	if err != nil {
		t.Fatal(err)
	}
	gu, out := k.f32([]float32{1, 2, 3, 4}), k.zeros(2)
	g, err := d.BindGroup(p, "act", Whole(k.uniform(shaders.ActMulParams{F: 2})), Whole(k.step(0, 1, 0, 1)), Whole(gu), Whole(out))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	ds := []Dispatch{{P: p, G: g, X: 1, Y: 1, Z: 1, Label: "L0 act"}, {P: p, G: g, X: 1, Y: 1, Z: 1, Label: "L1 act"},
		{P: p, G: g, X: 1, Y: 1, Z: 1, Label: "final"}}
	if err := d.Run(nil, ds, nil); err != nil {
		t.Fatal(err)
	}
	got := k.read(out, 2)
	// SiLU(gate 1) · up 3.
	if want := float32(3 / (1 + math.Exp(-1))); math.Abs(float64(got[0]-want)) > 1e-5 {
		t.Errorf("act[0] = %v under profiling, want %v", got[0], want)
	}
	r := ProfileReport()
	t.Log("\n" + r)
	for _, want := range []string{"2 ×", "act", "1 ×", "final"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(r, "L0") || strings.Contains(r, "L1") {
		t.Error("per-layer labels not folded into one class")
	}
}

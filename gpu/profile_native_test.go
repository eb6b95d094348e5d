//go:build !js

package gpu

import (
	"errors"
	"strings"
	"testing"
)

// TestProfiler opens a second device with Profile.Timestamps on, runs labelled
// dispatches and checks that the report folds the per-layer labels into
// classes with their counts, and that results are unchanged.
func TestProfiler(t *testing.T) {
	testDevice(t) // skips without an adapter
	d, err := Open(Options{Profile: Profile{Timestamps: true}})
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
	x := []float32{1, 2, 3, 4}
	y := runDouble(t, d, x, "L0 act", "L1 act", "final")
	for i := range x {
		if y[i] != 2*x[i] {
			t.Errorf("y = %v under profiling, want 2·%v", y, x)
			break
		}
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

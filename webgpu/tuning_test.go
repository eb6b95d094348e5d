package webgpu

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/shaders"
)

// TestTuning runs a prompt long enough for the tiled GEMM and the tiled
// attention (and a decode step) under every knob of Tuning set away from
// its default, and wants the default's logits: the knobs change the
// kernels' geometry, never the result.
func TestTuning(t *testing.T) {
	d := testDevice(t)
	m, _ := loadFixture(t, "llama")
	ids := make([]int, 160)
	for i := range ids {
		ids[i] = (7*i + 3) % m.Arch.Vocab
	}
	run := func(tune Tuning) []float32 {
		t.Helper()
		b, err := New(m, Options{Device: d, Tuning: tune})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		s, err := b.newSession(len(ids) + 2)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got, err := s.Forward(ids, true)
		if err != nil {
			t.Fatal(err)
		}
		next, err := s.Forward([]int{ids[0]}, false)
		if err != nil {
			t.Fatal(err)
		}
		return append(got, next...)
	}
	want := run(Tuning{})
	for _, tune := range []Tuning{
		{Matvec: "all", MatvecShape: shaders.MatvecShape{Rows: 2, Sets: 2, Groups: 2}, MVRows: 2, GemmRows: 4, GemmTB: 2, GemmLargeRows: 1, AttnBlock: 32, TraceSteps: true},
		{Matvec: "rows", MVRows: 3, GemmRows: 16, GemmTB: 3, AttnBlock: 16, AttnPrep: "fused", AttnCombine: "separate"},
	} {
		got := run(tune)
		if diff, at := maxAbsDiff(got, want); diff > parityTol {
			t.Errorf("%+v: logits differ from the default tuning's by %g at %d", tune, diff, at)
		}
	}
}

// TestTuningRefused: a knob out of range is an error naming it, never a
// silent default.
func TestTuningRefused(t *testing.T) {
	for _, c := range []struct {
		tune Tuning
		want string
	}{
		{Tuning{MVRows: 17}, "MVRows 17"},
		{Tuning{GemmTB: -1}, "GemmTB -1"},
		{Tuning{AttnBlock: 8}, "AttnBlock 8"},
		{Tuning{Matvec: "staged"}, `Matvec "staged"`},
		{Tuning{AttnPrep: "separate"}, `AttnPrep "separate"`},
		{Tuning{AttnCombine: "o"}, `AttnCombine "o"`},
		{Tuning{MatvecShape: shaders.MatvecShape{Rows: 3, Sets: 1, Groups: 1}}, "MatvecShape 3,1,1"},
		{Tuning{MatvecShape: shaders.MatvecShape{Rows: 4}}, "MatvecShape 4,0,0"},
		{Tuning{SmallRows: 3}, "SmallRows 3"},
		{Tuning{SmallSteps: "on"}, `SmallSteps "on"`},
	} {
		if _, err := c.tune.resolve(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one naming %q", c.tune, err, c.want)
		}
	}
	got, err := Tuning{}.resolve()
	if err != nil || !reflect.DeepEqual(got, DefaultTuning()) {
		t.Errorf("Tuning{}.resolve() = %+v, %v; want %+v", got, err, DefaultTuning())
	}
}

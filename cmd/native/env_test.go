package main

import (
	"reflect"
	"testing"

	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/webgpu"
)

// TestGPUTuningFromEnv: the WebGPU tuning variables reach webgpu.Tuning
// with the acceptance the backend had when it read them itself (values
// that do not parse or are out of range keep the default).
func TestGPUTuningFromEnv(t *testing.T) {
	vars := []string{"CORTIQ_MATVEC", "CORTIQ_MATVEC_SHAPE", "CORTIQ_MV_ROWS", "CORTIQ_GEMM_ROWS", "CORTIQ_GEMM_TB", "CORTIQ_GEMM_LARGE_ROWS", "CORTIQ_ATTN_BLOCK", "CORTIQ_TRACE_STEPS", "CORTIQ_ATTN_PREP", "CORTIQ_ATTN_COMBINE"}
	set := func(vals ...string) {
		for i, v := range vars {
			t.Setenv(v, vals[i])
		}
	}
	set("", "", "", "", "", "", "", "", "", "")
	if got := gpuTuning(); !reflect.DeepEqual(got, webgpu.Tuning{}) {
		t.Errorf("no variables: %+v, want the zero Tuning", got)
	}
	set("all", "8,2,2", "2", "4", "3", "4096", "32", "1", "fused", "separate")
	want := webgpu.Tuning{Matvec: "all", MatvecShape: shaders.MatvecShape{Rows: 8, Sets: 2, Groups: 2}, MVRows: 2, GemmRows: 4, GemmTB: 3, GemmLargeRows: 4096, AttnBlock: 32, TraceSteps: true, AttnPrep: "fused", AttnCombine: "separate"}
	if got := gpuTuning(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	set("rows", "3,1,1", "17", "0", "x", "-5", "8", "yes", "separate", "x")
	if got := gpuTuning(); !reflect.DeepEqual(got, webgpu.Tuning{Matvec: "rows"}) {
		t.Errorf("out of range: %+v, want only Matvec rows", got)
	}
	set("staged", "", "", "", "", "", "300", "", "", "")
	if got := gpuTuning(); !reflect.DeepEqual(got, webgpu.Tuning{}) {
		t.Errorf("unknown values: %+v, want the zero Tuning", got)
	}
}

package main

import (
	"reflect"
	"testing"

	"github.com/cortiq/cortiq/gpu"
)

// TestGPUOptions: the profiling variables reach gpu.Options as they are
// set, and unset ones leave the zero value (nothing profiled).
func TestGPUOptions(t *testing.T) {
	for _, v := range []string{"CORTIQ_GPU_PROFILE", "CORTIQ_GPU_SKIP", "CORTIQ_GPU_DUP"} {
		t.Setenv(v, "")
	}
	if got := gpuOptions(); !reflect.DeepEqual(got, gpu.Options{}) {
		t.Errorf("unset: %+v, want the zero Options", got)
	}
	t.Setenv("CORTIQ_GPU_PROFILE", "1")
	t.Setenv("CORTIQ_GPU_SKIP", "attn,ffn")
	t.Setenv("CORTIQ_GPU_DUP", "head")
	want := gpu.Options{Profile: gpu.Profile{Timestamps: true, Skip: []string{"attn", "ffn"}, Dup: []string{"head"}}}
	if got := gpuOptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("set: %+v, want %+v", got, want)
	}
	t.Setenv("CORTIQ_GPU_PROFILE", "yes")
	if gpuOptions().Profile.Timestamps {
		t.Error("CORTIQ_GPU_PROFILE=yes turned timestamps on (only 1 does, as before)")
	}
}

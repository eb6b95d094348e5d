package main

import (
	"os"
	"strings"

	"github.com/cortiq/cortiq/gpu"
)

// gpuOptions are the GPU runtime's profiling aids, from the environment
// (read here, never in the library):
//
//	CORTIQ_GPU_PROFILE=1   time every dispatch (gpu.Profile.Timestamps;
//	                       `cortiq bench` prints GPU time per kernel class)
//	CORTIQ_GPU_SKIP=a,b    leave out the dispatches whose label contains a or b
//	CORTIQ_GPU_DUP=a,b     issue those dispatches twice
//
// SKIP and DUP attribute a step's time to kernel classes by difference; the
// results are garbage while either is set.
func gpuOptions() gpu.Options {
	return gpu.Options{Profile: gpu.Profile{
		Timestamps: os.Getenv("CORTIQ_GPU_PROFILE") == "1",
		Skip:       envList("CORTIQ_GPU_SKIP"),
		Dup:        envList("CORTIQ_GPU_DUP"),
	}}
}

// envList splits a comma-separated variable; unset or empty is nil.
func envList(name string) []string {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

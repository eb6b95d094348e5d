package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/cortiq/cortiq/cpu/kernel"
)

// applyKernelEnv maps the CPU kernel environment variables to the kernel
// package's options: CORTIQ_CPU_LEVEL selects the instruction set,
// generic|avx2|avx512|avx512vnni|amx on amd64, generic|neon|neondot on
// arm64 (by default the highest the CPU has; a level above what the CPU has means the highest it has; another
// architecture's level is an error), CORTIQ_KERNEL=exact|int8 picks the
// arithmetic of quantized products (int8 is the default).
func applyKernelEnv() error {
	if s := os.Getenv("CORTIQ_CPU_LEVEL"); s != "" {
		l, err := kernel.ParseLevel(s)
		if err != nil {
			return fmt.Errorf("CORTIQ_CPU_LEVEL: %w", err)
		}
		if ls := kernel.Levels(); !slices.Contains(ls, l) {
			return fmt.Errorf("CORTIQ_CPU_LEVEL=%s: not a level of this build (%s/%s has %v)", s, runtime.GOOS, runtime.GOARCH, ls)
		}
		kernel.SetLevel(l)
	}
	switch s := os.Getenv("CORTIQ_KERNEL"); s {
	case "":
	case "exact":
		kernel.SetMode(kernel.Exact)
	case "int8":
		kernel.SetMode(kernel.Int8)
	default:
		return fmt.Errorf("CORTIQ_KERNEL=%q: want exact or int8", s)
	}
	return nil
}

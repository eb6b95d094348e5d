package main

import (
	"fmt"
	"os"

	"github.com/cortiq/cortiq/cpu/kernel"
)

// applyKernelEnv maps the CPU kernel environment variables to the kernel
// package's options: CORTIQ_CPU_LEVEL=generic|avx2|avx512|avx512vnni|amx
// selects the instruction set (by default the highest the CPU has, AMX
// only when asked for; a level above what the CPU has means the highest
// it has), CORTIQ_KERNEL=exact|int8 picks the arithmetic of quantized
// products (int8 is the default).
func applyKernelEnv() error {
	if s := os.Getenv("CORTIQ_CPU_LEVEL"); s != "" {
		l, err := kernel.ParseLevel(s)
		if err != nil {
			return fmt.Errorf("CORTIQ_CPU_LEVEL: %w", err)
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

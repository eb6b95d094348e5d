package kernel

import (
	"fmt"
	"os"
	"testing"
)

// The tests check the Exact arithmetic unless they select Int8 themselves
// (mode_test.go), whatever the default mode. CORTIQ_CPU_LEVEL, as the
// command line reads it, starts the package at that level (lowered to what
// the CPU has), so that benchmarks and the tests that do not force levels
// themselves run there: CORTIQ_CPU_LEVEL=avx2 go test -bench DecodeStream.
func TestMain(m *testing.M) {
	SetMode(Exact)
	if s := os.Getenv("CORTIQ_CPU_LEVEL"); s != "" {
		l, err := ParseLevel(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "CORTIQ_CPU_LEVEL:", err)
			os.Exit(2)
		}
		if got := SetLevel(l); got != l {
			fmt.Fprintf(os.Stderr, "CORTIQ_CPU_LEVEL=%s: this CPU runs %s\n", s, got)
		}
	}
	os.Exit(m.Run())
}

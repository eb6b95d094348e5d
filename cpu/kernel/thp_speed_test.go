package kernel

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortiq/cortiq/tensor"
)

func TestTHPSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	for _, huge := range []bool{false, true, false, true} {
		for _, m := range []Mode{Exact, Int8} {
			const rows, cols = 151936 * 2, 896
			w := benchWeight(tensor.Q4_0, rows, cols)
			if huge {
				mem, err := unix.Mmap(-1, 0, len(w.Data)+(2<<20), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
				if err != nil {
					t.Fatal(err)
				}
				if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
					t.Fatal(err)
				}
				copy(mem, w.Data)
				w.Data = mem[:len(w.Data)]
			}
			x := randX(rand.New(rand.NewPCG(1, 2)), cols)
			y := make([]float32, rows)
			prev := SetMode(m)
			MatVec(y, w, x)
			best := time.Hour
			for range 5 {
				t0 := time.Now()
				MatVec(y, w, x)
				best = min(best, time.Since(t0))
			}
			SetMode(prev)
			fmt.Printf("huge=%v %s: %v  %.2f GB/s\n", huge, m, best, float64(len(w.Data))/float64(best))
		}
	}
}

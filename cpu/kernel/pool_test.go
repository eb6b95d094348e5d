package kernel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelForStress runs many parallel calls of varying sizes back to
// back, from several goroutines at once and from inside jobs, with pauses
// that let the helpers park, and checks that every call visits each of
// its items exactly once and returns only when all are done.
func TestParallelForStress(t *testing.T) {
	for _, procs := range []int{2, 3, 8} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var wg sync.WaitGroup
			for c := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seen := make([]atomic.Int32, 4096)
					for i := range 400 {
						n := 1 + (i*7919+c*131)%len(seen)
						if i%50 == 0 {
							time.Sleep(spinFor + 100*time.Microsecond) // the helpers park
						}
						grain := 1 + i%5
						nested := i%7 == 0
						ParallelFor(n, grain, func(lo, hi int) {
							if lo < 0 || hi > n || lo >= hi {
								t.Errorf("chunk [%d,%d) of %d", lo, hi, n)
								return
							}
							for k := lo; k < hi; k++ {
								seen[k].Add(1)
							}
							if nested {
								var inner atomic.Int32
								ParallelFor(8, 1, func(lo, hi int) { inner.Add(int32(hi - lo)) })
								if inner.Load() != 8 {
									t.Errorf("nested call did %d of 8", inner.Load())
								}
							}
						})
						for k := range n {
							if v := seen[k].Swap(0); v != 1 {
								t.Errorf("GOMAXPROCS %d, call %d (n=%d): item %d visited %d times", procs, i, n, k, v)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
		}()
	}
}

package kernel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The pool is a set of long-lived helper goroutines (started on demand, up
// to GOMAXPROCS-1); a parallel call hands them a job and works on it too,
// so a call costs a few channel operations, not goroutine starts. Chunks
// are claimed dynamically so that a core taken by someone else slows the
// call down instead of stalling it.

type job struct {
	fn    func(lo, hi int)
	ms    []matvec // run as runUnits(ms, lo, hi) when fn is nil
	n     int
	grain int // the smallest chunk
	div   int // a claim takes 1/div of what is left (at least grain)
	next  atomic.Int64
	wg    sync.WaitGroup
	left  atomic.Int32 // helpers still running it (after their wg.Done)
}

// jobPool recycles jobs: decode issues a hundred parallel products per
// token, none of which should allocate.
var jobPool = sync.Pool{New: func() any { return new(job) }}

var (
	serialForTest bool // makes every parallel call run inline (CPU-time measurements)

	poolMu      sync.Mutex
	poolJobs    = make(chan *job, 256)
	poolStarted atomic.Int32 // helper goroutines started
)

// ensureHelpers starts helper goroutines until n are running. The pool
// only grows: a helper that GOMAXPROCS no longer leaves room for just
// stays parked.
func ensureHelpers(n int) {
	if int(poolStarted.Load()) >= n {
		return
	}
	poolMu.Lock()
	defer poolMu.Unlock()
	for int(poolStarted.Load()) < n {
		go worker()
		poolStarted.Add(1)
	}
}

// worker runs jobs forever. After a job it polls for the next one for a
// short while before blocking: a decode step issues matrix products back to
// back, and waking a parked goroutine costs several microseconds, a large
// share of a small product.
func worker() {
	for {
		var j *job
		for spin := 0; spin < spinPolls && j == nil; spin++ {
			select {
			case j = <-poolJobs:
			default:
				if spin%64 == 63 {
					runtime.Gosched()
				}
			}
		}
		if j == nil {
			j = <-poolJobs
		}
		j.run()
		j.wg.Done()
		j.left.Add(-1) // last: the caller may reuse j once it reads 0
	}
}

// spinPolls bounds the polling after a job (a poll is tens of
// nanoseconds, so this is on the order of 50µs).
const spinPolls = 2000

// run claims and runs chunks until none is left. Chunks shrink as the
// work runs out (guided scheduling): the first are long, so that each
// worker streams a long stretch of the weights, and the last are small,
// so that workers finish together even when one was slowed down (by
// another process on its core): the wait for the slowest is at most
// one small chunk.
func (j *job) run() {
	for {
		lo := int(j.next.Load())
		if lo >= j.n {
			return
		}
		hi := min(j.n, lo+max(j.grain, (j.n-lo)/j.div))
		if !j.next.CompareAndSwap(int64(lo), int64(hi)) {
			continue
		}
		if j.fn != nil {
			j.fn(lo, hi)
		} else {
			runUnits(j.ms, lo, hi)
		}
	}
}

// Workers is the number of goroutines a parallel kernel uses:
// runtime.GOMAXPROCS(0), read at each call.
func Workers() int { return max(1, runtime.GOMAXPROCS(0)) }

// parallelFor calls fn over [0,n) split into chunks of at least grain
// items, on up to Workers() goroutines. Work below one grain, or on a
// single worker, runs inline on the caller.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	parallelRun(n, grain, fn, nil)
}

// parallelRun is parallelFor over fn, or, when fn is nil, over the units
// of the products ms (runUnits), without allocating.
func parallelRun(n, grain int, fn func(lo, hi int), ms []matvec) {
	if n <= 0 {
		return
	}
	nw := Workers()
	// Chunks of a quarter of a worker's share on average (guided: long
	// first, short last; job.run).
	chunk := max(grain, (n+4*nw-1)/(4*nw))
	if nw == 1 || n <= grain || serialForTest || (n+chunk-1)/chunk == 1 {
		if fn != nil {
			fn(0, n)
		} else {
			runUnits(ms, 0, n)
		}
		return
	}
	nchunks := (n + chunk - 1) / chunk
	j := jobPool.Get().(*job)
	j.fn, j.ms, j.n = fn, append(j.ms[:0], ms...), n
	j.grain, j.div = max(1, min(grain, chunk)), 2*nw
	j.next.Store(0)
	helpers := min(nw-1, nchunks-1)
	ensureHelpers(helpers)
	j.wg.Add(helpers)
	j.left.Store(int32(helpers))
	for range helpers {
		poolJobs <- j
	}
	j.run()
	// Wait for the helpers by polling for a while before blocking: a
	// parked caller is woken through the scheduler (microseconds, tens of
	// them in a VM), and decode waits once per product.
	for spin := 0; spin < spinPolls && j.left.Load() != 0; spin++ {
		if spin%64 == 63 {
			runtime.Gosched()
		}
	}
	j.wg.Wait()
	j.fn = nil
	clear(j.ms) // drop the references to the products' slices
	jobPool.Put(j)
}

package kernel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The pool is a team of long-lived helper goroutines (started on demand,
// up to GOMAXPROCS-1) and one job slot. A parallel call writes its job
// into the slot, publishes it by bumping a generation counter that the
// helpers poll, and works on it too; chunks are claimed dynamically, so
// that a core taken by someone else slows the call down instead of
// stalling it. The call returns when every item is done, not when every
// helper has checked out: a helper that another process kept off its core
// costs the call nothing unless it holds a chunk. A hand-off is one store
// that every polling helper sees (no channel operation per helper), so
// its cost does not grow with the thread count; a helper polls for a
// while after each job before it parks (waking a parked goroutine costs
// tens of microseconds in a VM, a large share of a small product). The
// polling is plain loads and PAUSE, never runtime.Gosched: at 16 threads
// the helpers' yields queued on the scheduler's lock and cost more than
// the products.
//
// One call at a time uses the team; a call that finds it busy (another
// goroutine's products, or a call made from inside a job) runs inline on
// its caller.

// job is the team's one job. Helpers that saw an older generation may
// still read it while the next call fills it in: what they read before a
// successful claim is atomic, and a claim succeeds only for the
// generation it names (the high 32 bits of next), which a call replaces
// before it changes anything else.
type job struct {
	fn    func(lo, hi int)
	ms    []matvec // run as runUnits(ms, lo, hi) when fn is nil
	n     atomic.Int64
	grain atomic.Int64 // the smallest chunk
	div   atomic.Int64 // a claim takes 1/div of what is left (at least grain)
	nw    atomic.Int64 // helpers with a smaller index take part
	_     [64]byte
	next  atomic.Uint64 // generation<<32 | the first unclaimed item
	_     [56]byte
	done  atomic.Int64 // items finished
	// The caller, when it stopped polling, waits on wake; the helper
	// that finishes the last chunk sends if waiting was set.
	waiting atomic.Bool
	wake    chan struct{}
}

type helper struct {
	parked atomic.Bool
	wake   chan struct{}
	_      [48]byte // one cache line per helper's flag
}

var (
	serialForTest bool // makes every parallel call run inline (CPU-time measurements)

	team struct {
		mu      sync.Mutex // held by the call using the team
		_       [56]byte
		gen     atomic.Uint64 // the generation of the job in the slot
		_       [56]byte
		job     job
		grow    sync.Mutex
		helpers atomic.Pointer[[]*helper] // grows only
	}
)

func init() { team.job.wake = make(chan struct{}, 1) }

// spinFor is how long a helper polls for the next job, and a caller for
// its job's end, before parking: longer than the gaps between a decode
// step's products and between a prefill layer's parallel parts.
const spinFor = 200 * time.Microsecond

// spinLimit is spinFor, or a twentieth of it when there are more workers
// than CPUs: then a polling helper holds a core another worker (or the
// caller) needs, and parking sooner measured faster (qwen-0.5b decode at
// GOMAXPROCS=16 on 2 cores). Each call sets it (parallelRun): the polling
// loops read it, never runtime.GOMAXPROCS, which takes the scheduler's
// lock.
var spinLimit atomic.Int64

func setSpinLimit(nw int) {
	d := spinFor
	if nw > numCPU {
		d = spinFor / 20
	}
	if spinLimit.Load() != int64(d) {
		spinLimit.Store(int64(d))
	}
}

var numCPU = runtime.NumCPU()

// ensureHelpers starts helper goroutines until n are running. The team
// only grows: a helper that GOMAXPROCS no longer leaves room for stays
// parked.
func ensureHelpers(n int) {
	if hs := team.helpers.Load(); hs != nil && len(*hs) >= n {
		return
	}
	team.grow.Lock()
	defer team.grow.Unlock()
	var hs []*helper
	if p := team.helpers.Load(); p != nil {
		hs = *p
	}
	for len(hs) < n {
		h := &helper{wake: make(chan struct{}, 1)}
		hs = append(hs[:len(hs):len(hs)], h)
		go h.loop(len(hs)-1, team.gen.Load())
	}
	team.helpers.Store(&hs)
}

// loop runs the jobs of generations after seen forever.
func (h *helper) loop(id int, seen uint64) {
	for {
		g := h.await(seen)
		seen = g
		if int64(id) < team.job.nw.Load() {
			team.job.run(uint32(g))
		}
	}
}

// await polls the generation until it differs from seen, then returns it;
// after spinFor without one it parks until a caller wakes it.
func (h *helper) await(seen uint64) uint64 {
	var b backoff
	for {
		if g := team.gen.Load(); g != seen {
			return g
		}
		if b.poll() {
			continue
		}
		h.parked.Store(true)
		if g := team.gen.Load(); g != seen {
			// A job arrived between the poll and the flag: take it,
			// and drop the wake-up its caller may have sent.
			if !h.parked.CompareAndSwap(true, false) {
				<-h.wake
			}
			return g
		}
		<-h.wake
		b = backoff{}
	}
}

// backoff paces a polling loop: poll pauses once and reports whether to
// poll again — true until the loop has polled for spinLimit (the clock
// is read every 64 pauses), then false: time to park.
type backoff struct {
	spins int
	t0    time.Time
}

func (b *backoff) poll() bool {
	spinPause()
	if b.spins++; b.spins%64 != 0 {
		return true
	}
	if b.t0.IsZero() {
		b.t0 = time.Now()
		return true
	}
	return time.Since(b.t0) < time.Duration(spinLimit.Load())
}

// run claims and runs chunks of generation gen until none is left.
// Chunks shrink as the work runs out (guided scheduling): the first are
// long, so that each worker streams a long stretch of the weights, and the
// last are small, so that workers finish together even when one was
// slowed down (by another process on its core): the wait for the slowest
// is at most one small chunk.
func (j *job) run(gen uint32) {
	for {
		cur := j.next.Load()
		if uint32(cur>>32) != gen {
			return
		}
		n, lo := j.n.Load(), int64(uint32(cur))
		if lo >= n {
			return
		}
		hi := min(n, lo+max(j.grain.Load(), (n-lo)/j.div.Load()))
		if !j.next.CompareAndSwap(cur, uint64(gen)<<32|uint64(hi)) {
			continue
		}
		// The claim holds the job: its fields stay until done reaches n.
		if j.fn != nil {
			j.fn(int(lo), int(hi))
		} else {
			runUnits(j.ms, int(lo), int(hi))
		}
		if j.done.Add(hi-lo) == n && j.waiting.Load() && j.waiting.CompareAndSwap(true, false) {
			j.wake <- struct{}{}
		}
	}
}

// Workers is the number of goroutines a parallel kernel uses:
// runtime.GOMAXPROCS(0), read at each call.
func Workers() int { return max(1, runtime.GOMAXPROCS(0)) }

// ParallelFor calls fn over [0,n) split into chunks of at least grain
// items, on up to Workers() goroutines (the kernels' team, the caller
// among them), and returns when every item is done. Work below one
// grain, or on a single worker, runs inline on the caller, as does a call
// while the team is busy (another goroutine's call, or one from inside
// fn). fn must be safe to call concurrently on disjoint ranges.
func ParallelFor(n, grain int, fn func(lo, hi int)) {
	parallelRun(n, grain, fn, nil)
}

// parallelFor is ParallelFor.
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
	inline := nw == 1 || n <= grain || serialForTest || (n+chunk-1)/chunk == 1 || n >= 1<<32
	if !inline && !team.mu.TryLock() {
		inline = true
	}
	if inline {
		if fn != nil {
			fn(0, n)
		} else {
			runUnits(ms, 0, n)
		}
		return
	}
	setSpinLimit(nw)
	nchunks := (n + chunk - 1) / chunk
	helpers := min(nw-1, nchunks-1)
	ensureHelpers(helpers)
	j := &team.job
	gen := team.gen.Load() + 1
	if uint32(gen) == 0 {
		gen++ // generation 0 would match a zero next
	}
	// next first: from here on no claim of an older generation succeeds
	// (a helper late for the last job may still try one, reading the
	// fields below as they change), and none of this one until the
	// generation is published.
	j.next.Store(gen << 32)
	j.fn, j.ms = fn, append(j.ms[:0], ms...)
	j.n.Store(int64(n))
	j.grain.Store(int64(max(1, min(grain, chunk))))
	j.div.Store(int64(2 * nw))
	j.nw.Store(int64(helpers))
	j.done.Store(0)
	team.gen.Store(gen)
	for _, h := range (*team.helpers.Load())[:helpers] {
		if h.parked.Load() && h.parked.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	j.run(uint32(gen))
	j.wait(int64(n))
	j.fn = nil
	clear(j.ms) // drop the references to the products' slices
	team.mu.Unlock()
}

// wait returns when n items are done: it polls for spinFor, then parks
// until the helper that finishes the last chunk wakes it.
func (j *job) wait(n int64) {
	var b backoff
	for j.done.Load() != n {
		if b.poll() {
			continue
		}
		j.waiting.Store(true)
		if j.done.Load() == n {
			if !j.waiting.CompareAndSwap(true, false) {
				<-j.wake // the finisher took the flag: take its send
			}
			return
		}
		<-j.wake
		return
	}
}

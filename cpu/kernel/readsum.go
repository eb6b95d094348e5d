package kernel

import (
	"encoding/binary"
	"sync"
	"time"
)

// ReadSum returns the sum of b as little-endian uint64 words (a trailing
// partial word is ignored). It reads b at the speed the kernels can
// stream memory, with the widest loads the level allows: it is the
// measure of read bandwidth that decode speed is compared against
// (`cortiq bench --bandwidth`).
func ReadSum(b []byte) uint64 {
	n := len(b) &^ 127
	var s uint64
	if n > 0 && readSumImpl != nil {
		s = readSumImpl(&b[0], n)
	} else {
		n = 0
	}
	for i := n; i+8 <= len(b); i += 8 {
		s += binary.LittleEndian.Uint64(b[i:])
	}
	return s
}

// readSumImpl sums n bytes (a multiple of 128) as uint64 words.
var readSumImpl func(p *byte, n int) uint64

// ParallelReadSum splits b into Workers() contiguous parts read at once
// (one per worker, as a matrix-vector product splits its rows).
func ParallelReadSum(b []byte) uint64 {
	nw := Workers()
	part := (len(b)/nw + 127) &^ 127
	sums := make([]uint64, nw)
	var wg sync.WaitGroup
	for i := range nw {
		lo, hi := min(i*part, len(b)), min((i+1)*part, len(b))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = ReadSum(b[lo:hi])
		}()
	}
	wg.Wait()
	var s uint64
	for _, v := range sums {
		s += v
	}
	return s
}

// ReadBandwidth measures how fast the kernels' workers read memory, in
// GB/s: a buffer of mib MiB (far beyond the caches; in huge pages where
// the OS gives them, as the packed weights are) read by ParallelReadSum,
// the best of reps passes. It is what decode's weight stream is compared
// against (`cortiq bench --bandwidth`, BenchmarkDecodeStream).
func ReadBandwidth(mib, reps int) float64 {
	buf, free := streamBuffer(mib << 20)
	defer free()
	for i := range buf {
		buf[i] = byte(i)
	}
	best := 0.0
	var sink uint64
	for range reps {
		t0 := time.Now()
		sink += ParallelReadSum(buf)
		best = max(best, float64(len(buf))/time.Since(t0).Seconds()/1e9)
	}
	readSink = sink
	return best
}

// readSink keeps ReadBandwidth's sums alive.
var readSink uint64

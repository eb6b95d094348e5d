//go:build linux

package kernel

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// allocWeights returns n zeroed bytes for repacked weights (plus slack
// bytes past n that a kernel may read) in anonymous memory that the
// kernel is asked to back with transparent huge pages: decode streams
// the packed weights once per token, and 2 MiB pages spare a TLB miss
// every 4 KiB. The memory is unmapped when owner is collected. It returns
// nil for small sizes or where the mapping fails; the caller then uses
// the heap.
func allocWeights(owner *packedW, n, slack int) []byte {
	if !hugeWeights || n < 4<<20 {
		return nil
	}
	b, m := mapHuge(n + slack)
	if b == nil {
		return nil
	}
	runtime.AddCleanup(owner, func(m []byte) { _ = unix.Munmap(m) }, m)
	return b[:n]
}

// mapHuge maps n zeroed bytes starting on a 2 MiB boundary, advised for
// transparent huge pages; b is the n bytes, m the whole mapping (for
// unix.Munmap). Both are nil if the mapping fails.
func mapHuge(n int) (b, m []byte) {
	const huge = 2 << 20
	size := (n + huge - 1) &^ (huge - 1)
	m, err := unix.Mmap(-1, 0, size+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil
	}
	off := 0
	if a := int(uintptrOf(m) & (huge - 1)); a != 0 {
		off = huge - a
	}
	_ = unix.Madvise(m[off:off+size], unix.MADV_HUGEPAGE)
	return m[off : off+n : off+n], m
}

// streamBuffer returns n bytes laid out in memory as packed weights are
// (huge pages where the OS gives them), and a function that frees them.
func streamBuffer(n int) ([]byte, func()) {
	if b, m := mapHuge(n); b != nil {
		return b, func() { _ = unix.Munmap(m) }
	}
	return make([]byte, n), func() {}
}

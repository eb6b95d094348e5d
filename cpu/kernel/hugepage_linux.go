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
// every 4 KiB and let the hardware prefetchers run across what would be
// 4 KiB page boundaries. The memory is unmapped when owner is collected.
// It returns nil where the mapping fails; the caller then uses the heap.
func allocWeights(owner *packedW, n, slack int) []byte {
	if !hugeWeights || n < 4<<20 {
		return nil
	}
	const huge = 2 << 20
	size := (n + slack + huge - 1) &^ (huge - 1)
	m, err := unix.Mmap(-1, 0, size+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	// Align the start to a huge page so that the whole range can be
	// backed by them.
	off := 0
	if a := int(uintptrOf(m) & (huge - 1)); a != 0 {
		off = huge - a
	}
	_ = unix.Madvise(m[off:off+size], unix.MADV_HUGEPAGE)
	runtime.AddCleanup(owner, func(m []byte) { _ = unix.Munmap(m) }, m)
	return m[off : off+n+slack : off+n+slack][:n]
}

//go:build !js

package gpu

/*
#include <stdint.h>
#include <stdlib.h>

// The few wgpu-native entry points we call directly, declared here rather
// than through the binding's header (same ABI as its lib/webgpu.h).
typedef void *cortiqBuffer;
typedef void (*cortiqMapCallback)(uint32_t status, void *userdata);
extern void wgpuBufferMapAsync(cortiqBuffer buffer, uint32_t mode, size_t offset, size_t size, cortiqMapCallback callback, void *userdata);
extern uint64_t wgpuBufferGetSize(cortiqBuffer buffer);

// The map state lives in C memory: 0 while pending, status+1 once the
// callback has run (inside wgpuDevicePoll, on the polling thread).
static void cortiq_map_done(uint32_t status, void *userdata) {
	*(volatile int32_t *)userdata = (int32_t)status + 1;
}

static void cortiq_map_async(cortiqBuffer b, uint32_t mode, size_t off, size_t size, int32_t *state) {
	*state = 0;
	wgpuBufferMapAsync(b, mode, off, size, cortiq_map_done, state);
}

static int32_t cortiq_map_state(int32_t *state) {
	return *(volatile int32_t *)state;
}
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// Why not (*wgpu.Buffer).MapAsync: the binding (v0.23.0) hands C a pointer
// to a Go-heap cgo.Handle that nothing in Go keeps alive, and C reads it when
// the callback fires inside a later Poll. Under GC that memory is reused:
// reads came back as zeros, or the process died ("misuse of an invalid
// Handle", or a bare SIGSEGV). This shim keeps the callback state in C.

// rawBuffer extracts the C handle from the binding's Buffer, whose layout is
// {deviceRef, ref}. checkRawBuffer verifies that against the buffer's size at
// Open, so a binding upgrade that moves the field fails loudly, not silently.
func rawBuffer(b *wgpu.Buffer) C.cortiqBuffer {
	return C.cortiqBuffer((*[2]unsafe.Pointer)(unsafe.Pointer(b))[1])
}

func checkRawBuffer(b *wgpu.Buffer) error {
	if got, want := uint64(C.wgpuBufferGetSize(rawBuffer(b))), b.GetSize(); got != want {
		return fmt.Errorf("webgpu: binding layout changed (buffer size %d via C, %d via Go)", got, want)
	}
	return nil
}

func (d *Device) mapRead(b *Buffer, dst []byte) error {
	n := uint64(len(dst))
	if err := d.mapWait(b, wgpu.MapModeRead, n); err != nil {
		return err
	}
	copy(dst, b.b.GetMappedRange(0, uint(n)))
	if err := b.b.Unmap(); err != nil {
		return fmt.Errorf("webgpu: unmap: %w", err)
	}
	return nil
}

func (d *Device) mapWait(b *Buffer, mode wgpu.MapMode, n uint64) error {
	state := (*C.int32_t)(C.malloc(4))
	defer C.free(unsafe.Pointer(state))
	C.cortiq_map_async(rawBuffer(b.b), C.uint32_t(mode), 0, C.size_t(n), state)
	// Poll without waiting: a blocking Poll gives up after wgpu-native's
	// 5 s fence timeout and then reports the submission done while the
	// device still runs it (measured on lavapipe: a 6.6 s submit "finished"
	// at 5.005 s, and freeing its resources crashed the driver). Spin
	// through the common case (a decode step is a few milliseconds, and a
	// sleep, however short it asks to be, came back late enough to cost
	// ~1 ms per token on the H200), then back off.
	start := time.Now()
	deadline := start.Add(readbackTimeout)
	for C.cortiq_map_state(state) == 0 {
		d.dev.Poll(false, nil)
		if C.cortiq_map_state(state) != 0 {
			break
		}
		backOff(start)
		if err := d.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			d.markLost("map timed out")
			return d.Err()
		}
	}
	if st := wgpu.BufferMapAsyncStatus(C.cortiq_map_state(state) - 1); st != wgpu.BufferMapAsyncStatusSuccess {
		return fmt.Errorf("webgpu: map failed: %s", st)
	}
	return nil
}

// spinWait is how long a wait for the device polls without sleeping.
const spinWait = 20 * time.Millisecond

// backOff is one pause of a poll loop that started at start: none while
// spinning, then sleeps growing with the wait, up to 1 ms.
func backOff(start time.Time) {
	if el := time.Since(start); el > spinWait {
		time.Sleep(min(el/8, time.Millisecond))
	}
}

// wait blocks until the queue is idle (see mapWait on why not Poll(true)).
func (d *Device) wait() {
	start := time.Now()
	for !d.dev.Poll(false, nil) && time.Since(start) < readbackTimeout {
		backOff(start)
	}
}

// Package driver is the CUDA driver API as the cuda backend uses it,
// loaded at run time from libcuda.so.1 (github.com/ebitengine/purego): no
// cgo link against CUDA, so the same binary builds everywhere and runs
// wherever the NVIDIA driver is installed. Where it is not, Load fails with
// an error wrapping ErrNoDriver ("cuda: no libcuda.so.1 (NVIDIA driver not
// installed): ...") and the backend refuses, naming that reason.
//
// The backend talks to a Device, an interface, never to the library
// directly: that is the fault-injection seam. Fake is a device without a
// GPU (host memory, kernels that compute nothing) and Faulty wraps any
// Device to refuse a load, fail the n-th launch or lose the device, so
// CPU-only tests can drive the engine's honest fallback.
//
// Every Device orders its work on one stream: copies and launches run in
// the order they are issued, Read waits for all of it. A Device is safe
// for use by one goroutine at a time per call (calls are serialized).
package driver

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// ErrNoDriver is wrapped by Load's error when libcuda.so.1 cannot be
// opened: the NVIDIA driver is not installed (or not for this OS).
var ErrNoDriver = errors.New("cuda: no libcuda.so.1 (NVIDIA driver not installed)")

// ErrNoPDL is wrapped by LaunchDependent's error where the driver or the
// device has no programmatic dependent launch.
var ErrNoPDL = errors.New("cuda: no programmatic dependent launch (cuLaunchKernelEx on sm_90 or newer)")

// Ptr is a device address (CUdeviceptr).
type Ptr uint64

// Module, Func and Graph are opaque driver handles.
type (
	Module uintptr
	Func   uintptr
	Graph  uintptr
	Event  uintptr
)

// Dim3 is a launch grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional Dim3.
func D1(x int) Dim3 { return Dim3{uint32(x), 1, 1} }

// Arg is one kernel argument in an 8-byte slot: the driver reads as many
// bytes as the parameter's type has from the slot's start (little endian),
// so an int32 or a float32 sits in the low half.
type Arg uint64

// P is a pointer argument.
func P(p Ptr) Arg { return Arg(p) }

// I32 is an int argument.
func I32(v int) Arg { return Arg(uint32(int32(v))) }

// U32 is an unsigned int argument.
func U32(v uint32) Arg { return Arg(v) }

// F32 is a float argument.
func F32(v float32) Arg { return Arg(math.Float32bits(v)) }

// Info describes one device.
type Info struct {
	Ordinal       int
	Name          string
	TotalMem      int64
	DriverVersion int // e.g. 13000 for CUDA 13.0
	Major, Minor  int // compute capability
	SMs           int
	// PDL: LaunchDependent is there (the driver has cuLaunchKernelEx, CUDA
	// 11.8 or newer, and the device is sm_90 or newer).
	PDL bool
}

// DriverString renders a driver API version such as 13000 as "13.0".
func DriverString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

func (i Info) String() string {
	return fmt.Sprintf("cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB, driver API %s)", i.Ordinal, i.Name, i.Major, i.Minor, i.SMs, float64(i.TotalMem)/(1<<30), DriverString(i.DriverVersion))
}

// Device is one CUDA context with its stream: what the backend needs.
type Device interface {
	Info() Info
	// MemInfo is the free and total device memory.
	MemInfo() (free, total int64, err error)
	Alloc(bytes int64) (Ptr, error)
	Free(Ptr) error
	// Upload copies host bytes to the device; src may be reused when it
	// returns.
	Upload(dst Ptr, src []byte) error
	// Read waits for the stream's work and copies device bytes back.
	Read(dst []byte, src Ptr) error
	// Copy copies n bytes device to device on the stream.
	Copy(dst, src Ptr, n int64) error
	// Zero sets n bytes to zero on the stream.
	Zero(dst Ptr, n int64) error
	// Load loads a PTX (or cubin) image.
	Load(image []byte) (Module, error)
	Function(m Module, name string) (Func, error)
	// SetSharedLimit lets f use up to bytes of dynamic shared memory.
	SetSharedLimit(f Func, bytes int) error
	Launch(f Func, grid, block Dim3, shared int, args ...Arg) error
	// LaunchDependent is Launch as a programmatic dependent launch
	// (cuLaunchKernelEx with programmatic stream serialization; in a
	// captured graph a programmatic edge): f may start before the kernel
	// before it on the stream has finished, so it must wait for it
	// (griddepcontrol.wait) before it touches what that kernel reads or
	// writes. Where Info().PDL is false it fails, wrapping ErrNoPDL.
	LaunchDependent(f Func, grid, block Dim3, shared int, args ...Arg) error
	// Sync waits for the stream's work; a kernel's fault surfaces here.
	Sync() error
	// BeginCapture starts recording the stream's launches and copies into
	// a graph; EndCapture instantiates it.
	BeginCapture() error
	EndCapture() (Graph, error)
	LaunchGraph(Graph) error
	DestroyGraph(Graph) error
	// Record records an event on the stream; Elapsed is the milliseconds
	// between two recorded events (after Sync).
	Record() (Event, error)
	Elapsed(a, b Event) (float32, error)
	DestroyEvent(Event) error
	Close() error
}

// Error is a failed driver call.
type Error struct {
	Op   string // the driver function
	Code int    // CUresult
	Name string // CUDA_ERROR_...
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("cuda: %s: %s (%s)", e.Op, e.Name, e.Msg)
	}
	return fmt.Sprintf("cuda: %s: %s", e.Op, e.Name)
}

// A few CUresult codes the backend and the fakes use.
const (
	ErrorOutOfMemory   = 2
	ErrorNoDevice      = 100
	ErrorInvalidImage  = 200
	ErrorNotFound      = 500
	ErrorLaunchFailed  = 719
	ErrorIllegalAddr   = 700
	ErrorDeviceUnavail = 46
	ErrorUnknown       = 999
)

var errorNames = map[int]string{
	ErrorOutOfMemory:   "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNoDevice:      "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidImage:  "CUDA_ERROR_INVALID_IMAGE",
	ErrorNotFound:      "CUDA_ERROR_NOT_FOUND",
	ErrorLaunchFailed:  "CUDA_ERROR_LAUNCH_FAILED",
	ErrorIllegalAddr:   "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorDeviceUnavail: "CUDA_ERROR_DEVICE_UNAVAILABLE",
	ErrorUnknown:       "CUDA_ERROR_UNKNOWN",
}

// Code returns err's CUresult, or 0 when err is not a driver error.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// Bytes views a slice of fixed-size values (float32, int32, uint16 ...) as
// its bytes, without a copy.
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

//go:build linux

package driver

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// lib is the loaded libcuda.so.1: the address of every entry point used.
type lib struct {
	handle uintptr
	fn     map[string]uintptr
}

// The driver entry points, by their exported names (the _v2 names are the
// ones cuda.h maps the plain names to since CUDA 3.2/4.0).
var symbols = []string{
	"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
	"cuDeviceTotalMem_v2", "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
	"cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxSynchronize", "cuMemGetInfo_v2",
	"cuMemAlloc_v2", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost", "cuMemcpyHtoD_v2",
	"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8Async", "cuModuleLoadDataEx",
	"cuModuleUnload", "cuModuleGetFunction", "cuFuncSetAttribute", "cuLaunchKernel",
	"cuStreamCreate", "cuStreamSynchronize", "cuStreamDestroy_v2", "cuEventCreate",
	"cuEventRecord", "cuEventDestroy_v2", "cuStreamBeginCapture_v2",
	"cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy",
	"cuGraphDestroy", "cuGetErrorName", "cuGetErrorString",
}

var (
	loadOnce sync.Once
	loaded   *lib
	loadErr  error
)

// libPath is the library Load opens (tests point it elsewhere).
var libPath = "libcuda.so.1"

// load opens libcuda.so.1 once and runs cuInit.
func load() (*lib, error) {
	loadOnce.Do(func() {
		h, err := purego.Dlopen(libPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		l := &lib{handle: h, fn: map[string]uintptr{}}
		for _, s := range symbols {
			a, err := purego.Dlsym(h, s)
			if err != nil {
				loadErr = fmt.Errorf("cuda: libcuda.so.1 lacks %s (driver too old; CUDA 12 or newer is needed): %v", s, err)
				return
			}
			l.fn[s] = a
		}
		// Optional: programmatic dependent launch (CUDA 11.8+ drivers).
		if a, err := purego.Dlsym(h, "cuLaunchKernelEx"); err == nil {
			l.fn["cuLaunchKernelEx"] = a
		}
		// Optional: the CUDA 12.8+ name first (CUDA 13 headers map to it).
		for _, s := range []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"} {
			if a, err := purego.Dlsym(h, s); err == nil {
				l.fn["elapsed"] = a
				break
			}
		}
		if err := l.check("cuInit", l.call("cuInit", 0)); err != nil {
			loadErr = err
			return
		}
		loaded = l
	})
	return loaded, loadErr
}

// call runs a driver entry point. Pointer arguments are converted to
// uintptr at the call site: uintptrescapes moves what they point to to the
// heap and keeps it alive for the call (a stack that grew during the call
// would otherwise leave the driver writing to its old copy).
//
//go:uintptrescapes
func (l *lib) call(name string, args ...uintptr) int {
	r, _, _ := purego.SyscallN(l.fn[name], args...)
	return int(int32(r))
}

func (l *lib) check(op string, code int) error {
	if code == 0 {
		return nil
	}
	e := &Error{Op: op, Code: code, Name: fmt.Sprintf("CUresult %d", code)}
	var p *byte
	if l.call("cuGetErrorName", uintptr(code), uintptr(unsafe.Pointer(&p))) == 0 && p != nil {
		e.Name = cString(p)
	}
	p = nil
	if l.call("cuGetErrorString", uintptr(code), uintptr(unsafe.Pointer(&p))) == 0 && p != nil {
		e.Msg = cString(p)
	}
	return e
}

func cString(p *byte) string {
	var b []byte
	for i := range 4096 {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// Devices lists the CUDA devices, or says why there are none.
func Devices() ([]Info, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	var n int32
	if err := l.check("cuDeviceGetCount", l.call("cuDeviceGetCount", uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	out := make([]Info, 0, n)
	for i := range int(n) {
		info, _, err := l.info(i)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// DeviceInfo describes device ordinal without creating a context: the
// driver is loaded (cuInit) and asked, nothing is allocated on the device.
func DeviceInfo(ordinal int) (Info, error) {
	l, err := load()
	if err != nil {
		return Info{}, err
	}
	info, _, err := l.info(ordinal)
	return info, err
}

// Attribute numbers (CUdevice_attribute).
const (
	attrSMs   = 16
	attrMajor = 75
	attrMinor = 76
)

func (l *lib) info(ordinal int) (Info, int32, error) {
	var dev int32
	if err := l.check("cuDeviceGet", l.call("cuDeviceGet", uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))); err != nil {
		return Info{}, 0, err
	}
	info := Info{Ordinal: ordinal}
	name := make([]byte, 256)
	if err := l.check("cuDeviceGetName", l.call("cuDeviceGetName", uintptr(unsafe.Pointer(&name[0])), 256, uintptr(dev))); err != nil {
		return Info{}, 0, err
	}
	for i, c := range name {
		if c == 0 {
			info.Name = string(name[:i])
			break
		}
	}
	var total uint64
	if err := l.check("cuDeviceTotalMem", l.call("cuDeviceTotalMem_v2", uintptr(unsafe.Pointer(&total)), uintptr(dev))); err != nil {
		return Info{}, 0, err
	}
	info.TotalMem = int64(total)
	var v int32
	l.call("cuDriverGetVersion", uintptr(unsafe.Pointer(&v)))
	info.DriverVersion = int(v)
	for _, a := range []struct {
		attr int
		dst  *int
	}{{attrSMs, &info.SMs}, {attrMajor, &info.Major}, {attrMinor, &info.Minor}} {
		var x int32
		if err := l.check("cuDeviceGetAttribute", l.call("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&x)), uintptr(a.attr), uintptr(dev))); err != nil {
			return Info{}, 0, err
		}
		*a.dst = int(x)
	}
	info.PDL = l.fn["cuLaunchKernelEx"] != 0 && info.Major >= 9
	return info, dev, nil
}

// Context is a device's primary context with one stream: the Device the
// backend uses on a real GPU.
type Context struct {
	mu     sync.Mutex
	l      *lib
	dev    int32
	ctx    uintptr
	stream uintptr
	info   Info
	// args is pinned host memory for cuLaunchKernel's parameter array:
	// maxArgs 8-byte values, then maxArgs pointers to them (the driver
	// copies them at launch, so one area serves every launch), then
	// cuLaunchKernelEx's launchConfig and its one launchAttr.
	args   unsafe.Pointer
	closed bool
}

const maxArgs = 64

// argsBytes is the size of Context.args: the parameters and their
// pointers, a launchConfig, a launchAttr.
const argsBytes = maxArgs*16 + 64 + 128

// launchConfig is CUlaunchConfig (cuda.h, 64-bit): 56 bytes.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	shared                 uint32
	_                      uint32
	stream                 uintptr
	attrs                  uintptr
	numAttrs               uint32
	_                      uint32
}

// launchAttr is CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte
// value union (an int for programmatic stream serialization).
type launchAttr struct {
	id    uint32
	_     uint32
	value [16]uint32
}

// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
const attrProgrammaticSerialization = 6

// Open retains device ordinal's primary context and creates its stream.
func Open(ordinal int) (*Context, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	info, dev, err := l.info(ordinal)
	if err != nil {
		return nil, err
	}
	c := &Context{l: l, dev: dev, info: info}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := l.check("cuDevicePrimaryCtxRetain", l.call("cuDevicePrimaryCtxRetain", uintptr(unsafe.Pointer(&c.ctx)), uintptr(dev))); err != nil {
		return nil, err
	}
	if err := l.check("cuCtxSetCurrent", l.call("cuCtxSetCurrent", c.ctx)); err != nil {
		l.call("cuDevicePrimaryCtxRelease_v2", uintptr(dev))
		return nil, err
	}
	// Flags 0: the stream synchronizes with the legacy default stream,
	// so synchronous uploads (cuMemcpyHtoD) are ordered with it.
	if err := l.check("cuStreamCreate", l.call("cuStreamCreate", uintptr(unsafe.Pointer(&c.stream)), 0)); err != nil {
		l.call("cuDevicePrimaryCtxRelease_v2", uintptr(dev))
		return nil, err
	}
	if err := l.check("cuMemHostAlloc", l.call("cuMemHostAlloc", uintptr(unsafe.Pointer(&c.args)), argsBytes, 0)); err != nil {
		l.call("cuStreamDestroy_v2", c.stream)
		l.call("cuDevicePrimaryCtxRelease_v2", uintptr(dev))
		return nil, err
	}
	return c, nil
}

// enter serializes a call and makes the context current on this thread.
func (c *Context) enter() error {
	c.mu.Lock()
	runtime.LockOSThread()
	if c.closed {
		c.exit()
		return fmt.Errorf("cuda: device %d is closed", c.info.Ordinal)
	}
	if err := c.l.check("cuCtxSetCurrent", c.l.call("cuCtxSetCurrent", c.ctx)); err != nil {
		c.exit()
		return err
	}
	return nil
}

func (c *Context) exit() {
	runtime.UnlockOSThread()
	c.mu.Unlock()
}

// do makes the context current and runs a driver entry point (pointer
// arguments as for lib.call).
//
//go:uintptrescapes
func (c *Context) do(op string, args ...uintptr) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return c.l.check(op, c.l.call(op, args...))
}

func (c *Context) Info() Info { return c.info }

func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = c.do("cuMemGetInfo_v2", uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int64(f), int64(t), err
}

func (c *Context) Alloc(bytes int64) (Ptr, error) {
	if bytes <= 0 {
		bytes = 1
	}
	var p uint64
	err := c.do("cuMemAlloc_v2", uintptr(unsafe.Pointer(&p)), uintptr(bytes))
	return Ptr(p), err
}

func (c *Context) Free(p Ptr) error {
	if p == 0 {
		return nil
	}
	return c.do("cuMemFree_v2", uintptr(p))
}

func (c *Context) Upload(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.do("cuMemcpyHtoD_v2", uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
}

func (c *Context) Read(dst []byte, src Ptr) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if len(dst) > 0 {
		if err := c.l.check("cuMemcpyDtoHAsync", c.l.call("cuMemcpyDtoHAsync_v2", uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), c.stream)); err != nil {
			return err
		}
	}
	return c.l.check("cuStreamSynchronize", c.l.call("cuStreamSynchronize", c.stream))
}

func (c *Context) Copy(dst, src Ptr, n int64) error {
	if n == 0 {
		return nil
	}
	return c.do("cuMemcpyDtoDAsync_v2", uintptr(dst), uintptr(src), uintptr(n), c.stream)
}

func (c *Context) Zero(dst Ptr, n int64) error {
	if n == 0 {
		return nil
	}
	return c.do("cuMemsetD8Async", uintptr(dst), 0, uintptr(n), c.stream)
}

// JIT options (CUjit_option) for the error log.
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
)

func (c *Context) Load(image []byte) (Module, error) {
	img := make([]byte, len(image)+1) // PTX must end in a NUL
	copy(img, image)
	log := make([]byte, 8192)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&log[0])), uintptr(len(log))}
	var m uintptr
	err := c.do("cuModuleLoadDataEx", uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&img[0])), 2,
		uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	runtime.KeepAlive(log)
	if err != nil {
		if s := cBytes(log); s != "" {
			return 0, fmt.Errorf("%w: %s", err, s)
		}
		return 0, err
	}
	return Module(m), nil
}

func cBytes(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func (c *Context) Function(m Module, name string) (Func, error) {
	n := append([]byte(name), 0)
	var f uintptr
	if err := c.do("cuModuleGetFunction", uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&n[0]))); err != nil {
		return 0, fmt.Errorf("%w: kernel %s", err, name)
	}
	return Func(f), nil
}

// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
const funcMaxDynamicShared = 8

func (c *Context) SetSharedLimit(f Func, bytes int) error {
	return c.do("cuFuncSetAttribute", uintptr(f), funcMaxDynamicShared, uintptr(bytes))
}

// packArgs writes args into the context's argument area (the values,
// then a pointer to each, as cuLaunchKernel's kernelParams) and returns
// the pointers' address. The caller holds the context (enter).
func (c *Context) packArgs(args []Arg) unsafe.Pointer {
	vals := unsafe.Slice((*uint64)(c.args), maxArgs)
	ptrsAt := unsafe.Add(c.args, maxArgs*8)
	ptrs := unsafe.Slice((*uintptr)(ptrsAt), maxArgs)
	for i, a := range args {
		vals[i] = uint64(a)
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	return ptrsAt
}

func (c *Context) Launch(f Func, grid, block Dim3, shared int, args ...Arg) error {
	if len(args) > maxArgs {
		return fmt.Errorf("cuda: launch with %d arguments (at most %d)", len(args), maxArgs)
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	ptrsAt := c.packArgs(args)
	return c.l.check("cuLaunchKernel", c.l.call("cuLaunchKernel", uintptr(f),
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(shared), c.stream, uintptr(ptrsAt), 0))
}

func (c *Context) LaunchDependent(f Func, grid, block Dim3, shared int, args ...Arg) error {
	if !c.info.PDL {
		return fmt.Errorf("%w: %s (sm_%d%d, driver API %s)", ErrNoPDL, c.info.Name, c.info.Major, c.info.Minor, DriverString(c.info.DriverVersion))
	}
	if len(args) > maxArgs {
		return fmt.Errorf("cuda: launch with %d arguments (at most %d)", len(args), maxArgs)
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	ptrsAt := c.packArgs(args)
	cfgAt := unsafe.Add(c.args, maxArgs*16)
	attrAt := unsafe.Add(cfgAt, 64)
	attr := (*launchAttr)(attrAt)
	*attr = launchAttr{id: attrProgrammaticSerialization}
	attr.value[0] = 1
	*(*launchConfig)(cfgAt) = launchConfig{gridX: grid.X, gridY: grid.Y, gridZ: grid.Z,
		blockX: block.X, blockY: block.Y, blockZ: block.Z, shared: uint32(shared),
		stream: c.stream, attrs: uintptr(attrAt), numAttrs: 1}
	return c.l.check("cuLaunchKernelEx", c.l.call("cuLaunchKernelEx", uintptr(cfgAt), uintptr(f), uintptr(ptrsAt), 0))
}

func (c *Context) Sync() error { return c.do("cuStreamSynchronize", c.stream) }

// CU_STREAM_CAPTURE_MODE_RELAXED: other threads may still allocate.
const captureRelaxed = 2

func (c *Context) BeginCapture() error {
	return c.do("cuStreamBeginCapture_v2", c.stream, captureRelaxed)
}

func (c *Context) EndCapture() (Graph, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.exit()
	var g, exec uintptr
	if err := c.l.check("cuStreamEndCapture", c.l.call("cuStreamEndCapture", c.stream, uintptr(unsafe.Pointer(&g)))); err != nil {
		return 0, err
	}
	defer c.l.call("cuGraphDestroy", g)
	if err := c.l.check("cuGraphInstantiateWithFlags", c.l.call("cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&exec)), g, 0)); err != nil {
		return 0, err
	}
	return Graph(exec), nil
}

func (c *Context) LaunchGraph(g Graph) error { return c.do("cuGraphLaunch", uintptr(g), c.stream) }

func (c *Context) DestroyGraph(g Graph) error {
	if g == 0 {
		return nil
	}
	return c.do("cuGraphExecDestroy", uintptr(g))
}

func (c *Context) Record() (Event, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.exit()
	var e uintptr
	if err := c.l.check("cuEventCreate", c.l.call("cuEventCreate", uintptr(unsafe.Pointer(&e)), 0)); err != nil {
		return 0, err
	}
	if err := c.l.check("cuEventRecord", c.l.call("cuEventRecord", e, c.stream)); err != nil {
		c.l.call("cuEventDestroy_v2", e)
		return 0, err
	}
	return Event(e), nil
}

func (c *Context) Elapsed(a, b Event) (float32, error) {
	if c.l.fn["elapsed"] == 0 {
		return 0, fmt.Errorf("cuda: the driver has no cuEventElapsedTime")
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.exit()
	var ms float32
	r, _, _ := purego.SyscallN(c.l.fn["elapsed"], uintptr(unsafe.Pointer(&ms)), uintptr(a), uintptr(b))
	return ms, c.l.check("cuEventElapsedTime", int(int32(r)))
}

func (c *Context) DestroyEvent(e Event) error { return c.do("cuEventDestroy_v2", uintptr(e)) }

// Close destroys the stream and releases the primary context (the driver
// frees the context's memory when the last retain is released).
func (c *Context) Close() error {
	if err := c.enter(); err != nil {
		return nil // already closed
	}
	defer c.exit()
	c.l.call("cuStreamSynchronize", c.stream)
	c.l.call("cuMemFreeHost", uintptr(c.args))
	c.l.call("cuStreamDestroy_v2", c.stream)
	c.closed = true
	return c.l.check("cuDevicePrimaryCtxRelease", c.l.call("cuDevicePrimaryCtxRelease_v2", uintptr(c.dev)))
}

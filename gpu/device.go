// Package gpu is the WebGPU runtime: it opens a device (wgpu-native, or the
// browser's navigator.gpu in the GOOS=js build), and gives buffers, compute
// pipelines with explicit bind group layouts, bind groups, recorded runs of
// copies and dispatches submitted as one command buffer, writes, readback,
// and per-kernel profiling. It knows nothing of models: the model backend
// (package webgpu) and the image pipeline's device path (package
// diffusion/device) build on it.
//
// Contract:
//   - A Device is used by one goroutine at a time (plus the driver's
//     callbacks); Close releases it and every pipeline cached on it.
//   - Every call fails with an error wrapping ErrDeviceLost once the device
//     is lost; a failed call never leaves partial results behind.
//   - Bindings stay below 2 GiB (MaxBinding) and within the device's limits;
//     a bad binding is an error naming the pipeline, never a driver abort.
//   - Library code reads no environment: profiling aids arrive in Options
//     at Open.
package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// ErrNoAdapter means no WebGPU adapter is available on this machine (no
// Vulkan/Metal/DX12 driver, or none this build can use).
var ErrNoAdapter = errors.New("webgpu: no adapter")

// ErrDeviceLost is wrapped by every error after the device is lost.
var ErrDeviceLost = errors.New("webgpu: device lost")

// MaxBinding is the largest storage binding we create. A binding of exactly
// 2 GiB makes arrayLength() report 0 on wgpu-native (measured), so stay
// strictly below.
const MaxBinding = 1<<31 - 256

// AdapterInfo describes the adapter a Device runs on.
type AdapterInfo struct {
	Name    string `json:"name"`
	Vendor  string `json:"vendor,omitempty"`
	Driver  string `json:"driver,omitempty"`
	Backend string `json:"backend,omitempty"`
	Type    string `json:"type,omitempty"` // "discrete", "integrated", "cpu", ...
}

// Device is an open WebGPU device with the helpers the backend needs:
// buffers, a pipeline cache with explicit bind group layouts, submit and
// readback, and the device-lost state. Safe for use by one goroutine at a
// time plus the driver's callbacks.
type Device struct {
	dev    *wgpu.Device
	queue  *wgpu.Queue
	info   AdapterInfo
	limits wgpu.Limits

	lost atomic.Pointer[string] // set by the device-lost callback

	readback atomic.Int64 // bytes read back to the host
	live     atomic.Int64 // buffers created and not yet released

	mu      sync.Mutex
	pipes   map[string]*Pipeline
	layouts map[string]*sharedLayout

	pending int64 // bytes written since the last flush

	// Faults injects failures (tests, and the facade's fallback drills).
	Faults Faults

	release func()

	prof *profiler // Profile.Timestamps (native only)

	skip, dup []string // Profile.Skip, Profile.Dup
}

// Faults makes the next matching operation fail, so callers can prove that
// an error never yields partial results. Zero value: no faults.
type Faults struct {
	PipelineBuild atomic.Bool // next pipeline creation fails
	Submit        atomic.Bool // next submit fails
	Readback      atomic.Bool // next readback fails
	LoseDevice    atomic.Bool // next submit marks the device lost
}

// LiveBuffers is the number of buffers created on d and not yet released
// (for leak checks: a failed or cancelled load must leave none).
func (d *Device) LiveBuffers() int64 { return d.live.Load() }

// Info is the adapter's description.
func (d *Device) Info() AdapterInfo { return d.info }

// Limits are the limits the device was created with.
func (d *Device) Limits() wgpu.Limits { return d.limits }

// Err is non-nil once the device is lost.
func (d *Device) Err() error {
	if m := d.lost.Load(); m != nil {
		return fmt.Errorf("%w: %s", ErrDeviceLost, *m)
	}
	return nil
}

func (d *Device) markLost(msg string) {
	d.lost.CompareAndSwap(nil, &msg)
}

// Close releases the device and everything cached on it.
func (d *Device) Close() {
	d.stopProfiler()
	d.mu.Lock()
	for _, p := range d.pipes {
		p.release()
	}
	d.pipes = nil
	for _, l := range d.layouts {
		l.pl.Release()
		l.bgl.Release()
	}
	d.layouts = nil
	d.mu.Unlock()
	if d.release != nil {
		d.release()
		d.release = nil
	}
}

// Buffer is a device buffer and its size.
type Buffer struct {
	b    *wgpu.Buffer
	size uint64
	live *atomic.Int64 // the device's count of live buffers
}

// Size in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// Release frees the buffer.
func (b *Buffer) Release() {
	if b != nil && b.b != nil {
		b.b.Destroy()
		b.b.Release()
		b.b = nil
		b.live.Add(-1)
	}
}

// NewBuffer creates a buffer of size bytes (rounded up to 16) with usage.
func (d *Device) NewBuffer(label string, size uint64, usage wgpu.BufferUsage) (*Buffer, error) {
	if err := d.Err(); err != nil {
		return nil, err
	}
	// Whole 16-byte units: kernels read weights as vec4<u32>.
	size = (size + 15) &^ 15
	if size == 0 {
		size = 16
	}
	if size > d.limits.MaxBufferSize {
		return nil, fmt.Errorf("webgpu: buffer %q of %d bytes exceeds the device's %d", label, size, d.limits.MaxBufferSize)
	}
	b, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: label, Size: size, Usage: usage})
	if err != nil {
		return nil, fmt.Errorf("webgpu: create buffer %q (%d bytes): %w", label, size, err)
	}
	d.live.Add(1)
	return &Buffer{b: b, size: size, live: &d.live}, nil
}

// NewStorage creates a storage buffer usable as a copy source and target.
// Storage buffers bound whole must stay under 2 GiB (see MaxBinding).
func (d *Device) NewStorage(label string, size uint64) (*Buffer, error) {
	if size > MaxBinding || (d.limits.MaxStorageBufferBindingSize > 0 && size > d.limits.MaxStorageBufferBindingSize) {
		return nil, fmt.Errorf("webgpu: storage buffer %q of %d bytes exceeds the binding limit", label, size)
	}
	return d.NewBuffer(label, size, wgpu.BufferUsageStorage|wgpu.BufferUsageCopyDst|wgpu.BufferUsageCopySrc)
}

// NewUniform creates a uniform buffer holding data.
func (d *Device) NewUniform(label string, data []byte) (*Buffer, error) {
	size := uint64(len(data)+15) &^ 15
	b, err := d.NewBuffer(label, size, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
	if err != nil {
		return nil, err
	}
	if err := d.Write(b, 0, data); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

// NewStaging creates a buffer the host can map to read results back.
func (d *Device) NewStaging(label string, size uint64) (*Buffer, error) {
	return d.NewBuffer(label, size, wgpu.BufferUsageMapRead|wgpu.BufferUsageCopyDst)
}

// Write uploads data at offset off of b (both multiples of 4).
func (d *Device) Write(b *Buffer, off uint64, data []byte) error {
	if err := d.Err(); err != nil {
		return err
	}
	if off%4 != 0 {
		return fmt.Errorf("webgpu: write at unaligned offset %d", off)
	}
	if off+uint64(len(data)) > b.size {
		return fmt.Errorf("webgpu: write of %d bytes at %d overflows a %d-byte buffer", len(data), off, b.size)
	}
	if len(data)%4 != 0 {
		padded := make([]byte, (len(data)+3)&^3)
		copy(padded, data)
		data = padded
	}
	if len(data) == 0 {
		return nil
	}
	if err := d.writeBuffer(b, off, data); err != nil {
		return fmt.Errorf("webgpu: write buffer: %w", err)
	}
	return nil
}

// BindKind is how a kernel binds one resource.
type BindKind uint8

const (
	Uniform   BindKind = iota // var<uniform>
	ReadOnly                  // var<storage, read>
	ReadWrite                 // var<storage, read_write>
)

// Pipeline is a compute pipeline with its explicit bind group layout (the
// browser build has no GetBindGroupLayout, so layouts are always ours).
// Pipelines with the same binding kinds share one layout, so a bind group
// built once serves every variant of a kernel (decode matvec and prefill
// GEMM).
type Pipeline struct {
	pipe   *wgpu.ComputePipeline
	layout *wgpu.BindGroupLayout
	mod    *wgpu.ShaderModule
	kinds  []BindKind
}

type sharedLayout struct {
	bgl *wgpu.BindGroupLayout
	pl  *wgpu.PipelineLayout
}

// Kinds are the pipeline's binding kinds, bindings 0..n-1 of group 0.
func (p *Pipeline) Kinds() []BindKind { return p.kinds }

func (p *Pipeline) release() {
	if p.pipe != nil {
		p.pipe.Release()
	}
	if p.mod != nil {
		p.mod.Release()
	}
}

func kindsKey(kinds []BindKind) string {
	b := make([]byte, len(kinds))
	for i, k := range kinds {
		b[i] = '0' + byte(k)
	}
	return string(b)
}

// layoutFor returns the shared bind group and pipeline layouts for kinds;
// d.mu is held.
func (d *Device) layoutFor(kinds []BindKind) (*sharedLayout, error) {
	key := kindsKey(kinds)
	if l, ok := d.layouts[key]; ok {
		return l, nil
	}
	entries := make([]wgpu.BindGroupLayoutEntry, len(kinds))
	for i, k := range kinds {
		var t wgpu.BufferBindingType
		switch k {
		case Uniform:
			t = wgpu.BufferBindingTypeUniform
		case ReadOnly:
			t = wgpu.BufferBindingTypeReadOnlyStorage
		default:
			t = wgpu.BufferBindingTypeStorage
		}
		entries[i] = wgpu.BindGroupLayoutEntry{
			Binding:    uint32(i),
			Visibility: wgpu.ShaderStageCompute,
			Buffer:     wgpu.BufferBindingLayout{Type: t},
		}
	}
	bgl, err := d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: key, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("webgpu: bind group layout %s: %w", key, err)
	}
	pl, err := d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{
		Label:            key,
		BindGroupLayouts: []*wgpu.BindGroupLayout{bgl},
	})
	if err != nil {
		bgl.Release()
		return nil, fmt.Errorf("webgpu: pipeline layout %s: %w", key, err)
	}
	if d.layouts == nil {
		d.layouts = map[string]*sharedLayout{}
	}
	l := &sharedLayout{bgl: bgl, pl: pl}
	d.layouts[key] = l
	return l, nil
}

// Pipeline returns the compute pipeline of entry point "main" of src, built
// once per key (the cache key names the shader variant). kinds lists the
// bindings 0..n-1 of group 0.
func (d *Device) Pipeline(key, src string, kinds []BindKind) (*Pipeline, error) {
	return d.PipelineOf(key, func() (string, error) { return src, nil }, kinds)
}

// PipelineOf is Pipeline with the source generated only when key is not
// built yet: generating an unrolled kernel's source costs more than the
// lookup, and sessions ask for their pipelines op by op.
func (d *Device) PipelineOf(key string, gen func() (string, error), kinds []BindKind) (*Pipeline, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.pipes[key]; ok {
		return p, nil
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	src, err := gen()
	if err != nil {
		return nil, err
	}
	if d.Faults.PipelineBuild.CompareAndSwap(true, false) {
		return nil, fmt.Errorf("webgpu: pipeline %q: injected fault", key)
	}
	p := &Pipeline{kinds: append([]BindKind(nil), kinds...)}
	p.mod, err = d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label:          key,
		WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src},
	})
	if err != nil {
		return nil, fmt.Errorf("webgpu: compile %q: %w", key, err)
	}
	l, err := d.layoutFor(kinds)
	if err != nil {
		p.release()
		return nil, err
	}
	p.layout = l.bgl
	p.pipe, err = d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Layout:  l.pl,
		Compute: wgpu.ProgrammableStageDescriptor{Module: p.mod, EntryPoint: "main"},
	})
	if err != nil {
		p.release()
		return nil, fmt.Errorf("webgpu: compute pipeline %q: %w", key, err)
	}
	if d.pipes == nil {
		d.pipes = map[string]*Pipeline{}
	}
	d.pipes[key] = p
	return p, nil
}

// Binding is one bound buffer (the whole buffer when Size is 0).
type Binding struct {
	Buf  *Buffer
	Off  uint64
	Size uint64
}

// Whole binds all of b.
func Whole(b *Buffer) Binding { return Binding{Buf: b} }

// BindGroup builds a bind group for p; sizes are checked here so a bad
// binding is an error naming the pipeline, not a driver abort.
func (d *Device) BindGroup(p *Pipeline, key string, bs ...Binding) (*wgpu.BindGroup, error) {
	if len(bs) != len(p.kinds) {
		return nil, fmt.Errorf("webgpu: %s: %d bindings for a layout of %d", key, len(bs), len(p.kinds))
	}
	entries := make([]wgpu.BindGroupEntry, len(bs))
	for i, b := range bs {
		if b.Buf == nil || b.Buf.b == nil {
			return nil, fmt.Errorf("webgpu: %s: binding %d has no buffer", key, i)
		}
		size := b.Size
		if size == 0 {
			size = b.Buf.size - b.Off
		}
		if b.Off+size > b.Buf.size {
			return nil, fmt.Errorf("webgpu: %s: binding %d [%d,+%d) overflows a %d-byte buffer", key, i, b.Off, size, b.Buf.size)
		}
		if p.kinds[i] != Uniform && size > MaxBinding {
			return nil, fmt.Errorf("webgpu: %s: binding %d of %d bytes is not below 2 GiB", key, i, size)
		}
		entries[i] = wgpu.BindGroupEntry{Binding: uint32(i), Buffer: b.Buf.b, Offset: b.Off, Size: size}
	}
	g, err := d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Label: key, Layout: p.layout, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("webgpu: bind group %s: %w", key, err)
	}
	return g, nil
}

// Dispatch is one recorded kernel launch.
type Dispatch struct {
	P       *Pipeline
	G       *wgpu.BindGroup
	X, Y, Z uint32
	Label   string // for diagnostics
}

// Copy is one recorded buffer copy (after the compute pass).
type Copy struct {
	Src, Dst       *Buffer
	SrcOff, DstOff uint64
	Size           uint64
}

// Run encodes the copies pre, the dispatches in one compute pass, then the
// copies post, and submits the lot as one command buffer.
func (d *Device) Run(pre []Copy, ds []Dispatch, post []Copy) error {
	if err := d.Err(); err != nil {
		return err
	}
	if d.Faults.LoseDevice.CompareAndSwap(true, false) {
		d.markLost("injected fault")
		return d.Err()
	}
	if d.Faults.Submit.CompareAndSwap(true, false) {
		return errors.New("webgpu: submit: injected fault")
	}
	if d.prof != nil {
		return d.runProfiled(pre, ds, post)
	}
	enc, err := d.dev.CreateCommandEncoder(&wgpu.CommandEncoderDescriptor{})
	if err != nil {
		return fmt.Errorf("webgpu: command encoder: %w", err)
	}
	defer enc.Release()
	if err := encodeCopies(enc, pre); err != nil {
		return err
	}
	if len(ds) > 0 {
		pass := enc.BeginComputePass(nil)
		for _, x := range ds {
			if x.X == 0 || x.Y == 0 || x.Z == 0 || d.skipped(x.Label) {
				continue
			}
			pass.SetPipeline(x.P.pipe)
			pass.SetBindGroup(0, x.G, nil)
			pass.DispatchWorkgroups(x.X, x.Y, x.Z)
			if d.dup != nil && matchesAny(x.Label, d.dup) {
				pass.DispatchWorkgroups(x.X, x.Y, x.Z)
			}
		}
		pass.End()
		pass.Release()
	}
	if err := encodeCopies(enc, post); err != nil {
		return err
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return fmt.Errorf("webgpu: finish: %w", err)
	}
	defer cb.Release()
	d.queue.Submit(cb)
	return d.Err()
}

// encodeCopies records buffer copies (sizes rounded up to whole words).
func encodeCopies(enc *wgpu.CommandEncoder, cs []Copy) error {
	for _, c := range cs {
		if err := enc.CopyBufferToBuffer(c.Src.b, c.SrcOff, c.Dst.b, c.DstOff, (c.Size+3)&^3); err != nil {
			return fmt.Errorf("webgpu: copy: %w", err)
		}
	}
	return nil
}

// Flush submits the writes queued so far and waits for the device to take
// them, releasing the driver's staging memory.
func (d *Device) Flush() error {
	if err := d.Err(); err != nil {
		return err
	}
	d.queue.Submit()
	d.wait()
	d.pending = 0
	return d.Err()
}

// Read maps staging buffer b and copies its first n bytes out. The caller
// has already submitted the copy into b.
func (d *Device) Read(b *Buffer, n uint64) ([]byte, error) {
	out := make([]byte, (n+3)&^3)
	if err := d.readInto(b, out); err != nil {
		return nil, err
	}
	return out[:n], nil
}

// ReadF32 is Read of n float32 values, copied from the mapping straight into
// the result: per-token logits are half a megabyte at real vocabulary
// sizes, and a byte copy plus a conversion doubled the garbage per token.
func (d *Device) ReadF32(b *Buffer, n int) ([]float32, error) {
	v := make([]float32, n)
	if n == 0 {
		return v, nil
	}
	if !littleEndian {
		raw, err := d.Read(b, uint64(4*n))
		if err != nil {
			return nil, err
		}
		return BytesF32(raw), nil
	}
	if err := d.readInto(b, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*n)); err != nil {
		return nil, err
	}
	return v, nil
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// readInto fills dst (a multiple of 4 bytes) from the start of staging
// buffer b.
func (d *Device) readInto(b *Buffer, dst []byte) error {
	if err := d.Err(); err != nil {
		return err
	}
	if d.Faults.Readback.CompareAndSwap(true, false) {
		return errors.New("webgpu: readback: injected fault")
	}
	if uint64(len(dst)) > b.size {
		return fmt.Errorf("webgpu: read of %d bytes from a %d-byte buffer", len(dst), b.size)
	}
	if err := d.mapRead(b, dst); err != nil {
		return err
	}
	d.readback.Add(int64(len(dst)))
	return d.Err()
}

// ReadbackBytes is the number of bytes read back to the host so far.
func (d *Device) ReadbackBytes() int64 { return d.readback.Load() }

// ReadBuffer copies n bytes of storage buffer src to the host through a
// temporary staging buffer (tests and one-off reads; the backend keeps its
// own staging buffers).
func (d *Device) ReadBuffer(src *Buffer, n uint64) ([]byte, error) {
	st, err := d.NewStaging("readback", n)
	if err != nil {
		return nil, err
	}
	defer st.Release()
	if err := d.Run(nil, nil, []Copy{{Src: src, Dst: st, Size: n}}); err != nil {
		return nil, err
	}
	return d.Read(st, n)
}

// F32Bytes encodes float32 values little-endian.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// BytesF32 decodes little-endian float32 values.
func BytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// U32Bytes encodes uint32 values little-endian.
func U32Bytes(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// skipped reports whether Run leaves out a dispatch labelled label
// (Profile.Skip).
func (d *Device) skipped(label string) bool {
	return d.skip != nil && matchesAny(label, d.skip)
}

func matchesAny(label string, subs []string) bool {
	for _, s := range subs {
		if s != "" && strings.Contains(label, s) {
			return true
		}
	}
	return false
}

// Kinds converts binding kinds written in another package's type with
// BindKind's order (shaders.Bind, the kernel table's) to BindKinds.
func Kinds[T ~uint8](bs []T) []BindKind {
	out := make([]BindKind, len(bs))
	for i, b := range bs {
		if BindKind(b) > ReadWrite {
			panic(fmt.Sprintf("gpu: binding kind %d", b))
		}
		out[i] = BindKind(b)
	}
	return out
}

package webgpu

import "github.com/cortiq/cortiq/gpu"

// Deprecated aliases: callers move to gpu.X; removed after the house merge.
// The WebGPU runtime (device, buffers, pipelines, bind groups, runs,
// readback, profiling) lives in package gpu; these names keep the code
// written against webgpu.X compiling meanwhile.

type (
	Device      = gpu.Device
	AdapterInfo = gpu.AdapterInfo
	Faults      = gpu.Faults
	Buffer      = gpu.Buffer
	BindKind    = gpu.BindKind
	Pipeline    = gpu.Pipeline
	Binding     = gpu.Binding
	Dispatch    = gpu.Dispatch
	Copy        = gpu.Copy
)

const (
	Uniform   = gpu.Uniform
	ReadOnly  = gpu.ReadOnly
	ReadWrite = gpu.ReadWrite

	maxBinding = gpu.MaxBinding
)

var (
	ErrNoAdapter  = gpu.ErrNoAdapter
	ErrDeviceLost = gpu.ErrDeviceLost
)

// Open is gpu.Open with the zero gpu.Options.
func Open() (*Device, error) { return gpu.Open(gpu.Options{}) }

// Whole is gpu.Whole.
func Whole(b *Buffer) Binding { return gpu.Whole(b) }

// F32Bytes is gpu.F32Bytes.
func F32Bytes(v []float32) []byte { return gpu.F32Bytes(v) }

// BytesF32 is gpu.BytesF32.
func BytesF32(b []byte) []float32 { return gpu.BytesF32(b) }

// U32Bytes is gpu.U32Bytes.
func U32Bytes(v []uint32) []byte { return gpu.U32Bytes(v) }

// ProfileReport is gpu.ProfileReport.
func ProfileReport() string { return gpu.ProfileReport() }

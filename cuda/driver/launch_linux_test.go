//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestLaunchConfigLayout: the structs handed to cuLaunchKernelEx have
// cuda.h's sizes and offsets (CUlaunchConfig 56 bytes, hStream at 32;
// CUlaunchAttribute 72, the value at 8).
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	if unsafe.Sizeof(c) != 56 || unsafe.Offsetof(c.stream) != 32 || unsafe.Offsetof(c.attrs) != 40 || unsafe.Offsetof(c.numAttrs) != 48 {
		t.Errorf("launchConfig: %d bytes, stream at %d, attrs at %d, numAttrs at %d", unsafe.Sizeof(c),
			unsafe.Offsetof(c.stream), unsafe.Offsetof(c.attrs), unsafe.Offsetof(c.numAttrs))
	}
	if unsafe.Sizeof(a) != 72 || unsafe.Offsetof(a.value) != 8 {
		t.Errorf("launchAttr: %d bytes, value at %d", unsafe.Sizeof(a), unsafe.Offsetof(a.value))
	}
	if maxArgs*16+64 < maxArgs*16+int(unsafe.Sizeof(c)) || argsBytes < maxArgs*16+64+int(unsafe.Sizeof(a)) {
		t.Errorf("argsBytes %d cannot hold the parameters, the config and the attribute", argsBytes)
	}
}

// add1PDL is add1 (driver_test.go) for sm_90 that waits for the kernel
// before it and then lets the next one launch, as the backend's kernels do.
const add1PDL = `.version 7.8
.target sm_90
.address_size 64
.visible .entry add1(.param .u64 p, .param .u32 n, .param .f32 v)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<5>;
	griddepcontrol.wait;
	griddepcontrol.launch_dependents;
	ld.param.u64 %rd1, [p];
	ld.param.u32 %r1, [n];
	ld.param.f32 %f1, [v];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.f32 %f2, [%rd4];
	add.f32 %f2, %f2, %f1;
	st.global.f32 [%rd4], %f2;
DONE:
	ret;
}
`

// TestDependentLaunch (GPU, sm_90): dependent launches, direct and in a
// captured graph, each adding to what the one before wrote, sum exactly.
func TestDependentLaunch(t *testing.T) {
	c := open(t)
	if !c.Info().PDL {
		if err := c.LaunchDependent(0, D1(1), D1(1), 0); err == nil {
			t.Fatal("LaunchDependent succeeded where Info().PDL is false")
		}
		t.Skipf("%s: no programmatic dependent launch", c.Info())
	}
	const n = 1 << 20
	p, err := c.Alloc(n * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(p)
	if err := c.Zero(p, n*4); err != nil {
		t.Fatal(err)
	}
	m, err := c.Load([]byte(add1PDL))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Function(m, "add1")
	if err != nil {
		t.Fatal(err)
	}
	grid := D1(n / 256)
	for range 4 {
		if err := c.LaunchDependent(f, grid, D1(256), 0, P(p), I32(n), F32(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(f, grid, D1(256), 0, P(p), I32(n), F32(1)); err != nil {
		t.Fatal(err)
	}
	for range 15 {
		if err := c.LaunchDependent(f, grid, D1(256), 0, P(p), I32(n), F32(1)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := c.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer c.DestroyGraph(g)
	for range 10 {
		if err := c.LaunchGraph(g); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]float32, n)
	if err := c.Read(Bytes(got), p); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 164 {
			t.Fatalf("element %d: %v, want 164 (4 + 10 graphs of 16 launches)", i, v)
		}
	}
}

package driver

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// open returns device 0, or skips naming why there is none.
func open(t *testing.T) *Context {
	t.Helper()
	c, err := Open(0)
	if err != nil {
		if errors.Is(err, ErrNoDriver) || Code(err) == ErrorNoDevice {
			t.Skipf("no CUDA device: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestNoDriverMessage(t *testing.T) {
	_, err := Devices()
	if err == nil {
		t.Skip("a CUDA driver is installed here")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Skipf("driver present but failing: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "cuda: no libcuda.so.1 (NVIDIA driver not installed)") {
		t.Fatalf("error %q does not say the driver is missing", err)
	}
}

// add1 adds v to the first n floats at p.
const add1PTX = `.version 7.0
.target sm_75
.address_size 64
.visible .entry add1(.param .u64 p, .param .u32 n, .param .f32 v)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<5>;
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

// exercise runs the same sequence on any Device: upload, launch, graph,
// read back.
func exercise(t *testing.T, d Device, compute bool) {
	t.Helper()
	const n = 1000
	p, err := d.Alloc(n * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i)
	}
	if err := d.Upload(p, Bytes(host)); err != nil {
		t.Fatal(err)
	}
	m, err := d.Load([]byte(add1PTX))
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Function(m, "add1")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(f, D1((n+127)/128), D1(128), 0, P(p), I32(n), F32(0.5)); err != nil {
		t.Fatal(err)
	}
	// A graph of two launches, run three times: +6 in all.
	if err := d.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := d.Launch(f, D1((n+127)/128), D1(128), 0, P(p), I32(n), F32(1)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := d.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Record()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := d.LaunchGraph(g); err != nil {
			t.Fatal(err)
		}
	}
	b, err := d.Record()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := d.Read(Bytes(got), p); err != nil {
		t.Fatal(err)
	}
	if ms, err := d.Elapsed(a, b); err != nil || ms < 0 || math.IsNaN(float64(ms)) {
		t.Fatalf("elapsed %v ms, %v", ms, err)
	}
	d.DestroyEvent(a)
	d.DestroyEvent(b)
	d.DestroyGraph(g)
	if !compute {
		return
	}
	for i, v := range got {
		if v != float32(i)+6.5 {
			t.Fatalf("element %d: %v, want %v", i, v, float32(i)+6.5)
		}
	}
	// A window of the allocation reads back alone.
	part := make([]float32, 10)
	if err := d.Read(Bytes(part), p+40); err != nil || part[0] != 16.5 {
		t.Fatalf("read at an offset: %v %v", part[0], err)
	}
}

func TestDevice(t *testing.T) {
	c := open(t)
	t.Logf("%s", c.Info())
	if free, total, err := c.MemInfo(); err != nil || free <= 0 || total < free {
		t.Fatalf("memory %d free of %d: %v", free, total, err)
	}
	exercise(t, c, true)
	if _, err := c.Load([]byte("not ptx")); err == nil {
		t.Fatal("a broken image loaded")
	} else {
		t.Logf("broken image: %v", err)
	}
	for _, n := range []int64{1, 16, 1 << 20, 33 << 20, 1 << 30} {
		p, err := c.Alloc(n)
		if err != nil {
			t.Fatalf("alloc %d: %v", n, err)
		}
		if err := c.Zero(p, n); err != nil {
			t.Errorf("zero %d bytes: %v", n, err)
		}
		c.Free(p)
	}
	if _, err := c.Alloc(1 << 50); Code(err) != ErrorOutOfMemory {
		t.Fatalf("a petabyte allocation: %v", err)
	}
}

func TestFake(t *testing.T) {
	exercise(t, NewFake(1<<20), false)
	f := NewFake(1 << 20)
	if _, err := f.Alloc(2 << 20); Code(err) != ErrorOutOfMemory {
		t.Fatalf("over the fake's memory: %v", err)
	}
	p, _ := f.Alloc(16)
	if err := f.Read(make([]byte, 32), p); Code(err) != ErrorIllegalAddr {
		t.Fatalf("reading past an allocation: %v", err)
	}
}

func TestFaulty(t *testing.T) {
	d := &Faulty{Device: NewFake(1 << 20), RefuseLoad: true}
	if _, err := d.Load(nil); Code(err) != ErrorInvalidImage {
		t.Fatalf("refused load: %v", err)
	}
	d = &Faulty{Device: NewFake(1 << 20), FailLaunch: 2}
	if err := d.Launch(1, D1(1), D1(1), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(1, D1(1), D1(1), 0); Code(err) != ErrorLaunchFailed {
		t.Fatalf("second launch: %v", err)
	}
	if err := d.Launch(1, D1(1), D1(1), 0); err != nil {
		t.Fatalf("third launch: %v", err)
	}
	d = &Faulty{Device: NewFake(1 << 20), LoseAfter: 1}
	p, _ := d.Alloc(4)
	if err := d.Launch(1, D1(1), D1(1), 0); Code(err) != ErrorDeviceUnavail || !d.Lost() {
		t.Fatalf("lost device: %v", err)
	}
	if err := d.Read(make([]byte, 4), p); Code(err) != ErrorDeviceUnavail {
		t.Fatalf("read after loss: %v", err)
	}
	d = &Faulty{Device: NewFake(1 << 20), AllocLimit: 100}
	if _, err := d.Alloc(101); Code(err) != ErrorOutOfMemory {
		t.Fatalf("allocation past the limit: %v", err)
	}
}

func TestFakeDependent(t *testing.T) {
	f := NewFake(1 << 20)
	if !f.Info().PDL {
		t.Fatal("the fake sm_90 device has no PDL")
	}
	if err := f.LaunchDependent(1, D1(1), D1(1), 0); err != nil || f.Dependent != 1 || f.Launches != 1 {
		t.Fatalf("dependent launch: %v (%d dependent of %d)", err, f.Dependent, f.Launches)
	}
	f.SetPDL(false)
	if err := f.LaunchDependent(1, D1(1), D1(1), 0); !errors.Is(err, ErrNoPDL) {
		t.Fatalf("dependent launch without PDL: %v", err)
	}
	d := &Faulty{Device: NewFake(1 << 20), FailLaunch: 2}
	if err := d.Launch(1, D1(1), D1(1), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.LaunchDependent(1, D1(1), D1(1), 0); Code(err) != ErrorLaunchFailed {
		t.Fatalf("a failing dependent launch: %v", err)
	}
	d = &Faulty{Device: NewFake(1 << 20), LoseAfter: 1}
	if err := d.LaunchDependent(1, D1(1), D1(1), 0); Code(err) != ErrorDeviceUnavail || !d.Lost() {
		t.Fatalf("lost at a dependent launch: %v", err)
	}
}

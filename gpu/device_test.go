package gpu

import (
	"errors"
	"sync"
	"testing"
)

var (
	sharedOnce sync.Once
	sharedDev  *Device
	sharedErr  error
)

// testDevice opens one device for the whole test binary, or skips.
func testDevice(t testing.TB) *Device {
	t.Helper()
	sharedOnce.Do(func() { sharedDev, sharedErr = Open(Options{}) })
	if sharedErr != nil {
		if errors.Is(sharedErr, ErrNoAdapter) {
			t.Skipf("no WebGPU adapter (install a Vulkan driver, e.g. mesa-vulkan-drivers for lavapipe): %v", sharedErr)
		}
		t.Fatalf("open device: %v", sharedErr)
	}
	return sharedDev
}

func TestOpen(t *testing.T) {
	d := testDevice(t)
	info := d.Info()
	t.Logf("adapter %+v maxBuffer %d maxBinding %d", info, d.Limits().MaxBufferSize, d.Limits().MaxStorageBufferBindingSize)
	b, err := d.NewStorage("t", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	want := []float32{1, 2, 3, 4.5}
	if err := d.Write(b, 16, F32Bytes(want)); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadBuffer(b, 32)
	if err != nil {
		t.Fatal(err)
	}
	g := BytesF32(got)
	for i, w := range want {
		if g[4+i] != w {
			t.Fatalf("readback %v, want %v at 4..", g, want)
		}
	}
	if err := d.Write(b, 60, make([]byte, 8)); err == nil {
		t.Fatal("overflowing write accepted")
	}
}

// doubleSrc writes out[i] = 2·in[i] for the n = u.x values.
const doubleSrc = `
@group(0) @binding(0) var<uniform> u: vec4<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < u.x) {
        y[gid.x] = 2.0 * x[gid.x];
    }
}`

// countSrc adds one to s[0] per dispatch.
const countSrc = `
@group(0) @binding(0) var<storage, read_write> s: array<u32>;
@compute @workgroup_size(1)
fn main() {
    s[0] = s[0] + 1u;
}`

// runDouble runs doubleSrc over x on d with the dispatch labels given (the
// same pass each time, so y is 2·x however many run) and returns y.
func runDouble(t *testing.T, d *Device, x []float32, labels ...string) []float32 {
	t.Helper()
	p, err := d.Pipeline("test/double", doubleSrc, []BindKind{Uniform, ReadOnly, ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.NewUniform("u", U32Bytes([]uint32{uint32(len(x)), 0, 0, 0}))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Release()
	xb, err := d.Upload("x", F32Bytes(x))
	if err != nil {
		t.Fatal(err)
	}
	defer xb.Release()
	yb, err := d.NewStorage("y", uint64(4*len(x)))
	if err != nil {
		t.Fatal(err)
	}
	defer yb.Release()
	g, err := d.BindGroup(p, "double", Whole(u), Whole(xb), Whole(yb))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	var ds []Dispatch
	for _, l := range labels {
		ds = append(ds, Dispatch{P: p, G: g, X: uint32((len(x) + 63) / 64), Y: 1, Z: 1, Label: l})
	}
	if err := d.Run(nil, ds, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := d.ReadBuffer(yb, uint64(4*len(x)))
	if err != nil {
		t.Fatal(err)
	}
	return BytesF32(raw)
}

func TestRunAndBindingChecks(t *testing.T) {
	d := testDevice(t)
	x := []float32{1, -2, 3.5, 0, 7}
	y := runDouble(t, d, x, "double")
	for i := range x {
		if y[i] != 2*x[i] {
			t.Fatalf("y = %v, want 2·%v", y, x)
		}
	}
	p, err := d.Pipeline("test/double", doubleSrc, []BindKind{Uniform, ReadOnly, ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	if k := p.Kinds(); len(k) != 3 || k[0] != Uniform || k[2] != ReadWrite {
		t.Errorf("Kinds() = %v", k)
	}
	b, err := d.NewStorage("b", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if _, err := d.BindGroup(p, "short", Whole(b)); err == nil {
		t.Error("a bind group with too few bindings accepted")
	}
	if _, err := d.BindGroup(p, "overflow", Whole(b), Whole(b), Binding{Buf: b, Off: 32, Size: 64}); err == nil {
		t.Error("a binding past the buffer's end accepted")
	}
}

// TestProfileSkipDup: a device opened with Profile.Skip leaves out the
// matching dispatches and one with Profile.Dup issues them twice; the
// shared device (zero Options) runs each once.
func TestProfileSkipDup(t *testing.T) {
	testDevice(t) // skips without an adapter
	for _, c := range []struct {
		name string
		prof Profile
		want uint32 // counts for the labels "L0 attn", "L0 ffn", "head"
	}{
		{"none", Profile{}, 3},
		{"skip", Profile{Skip: []string{"attn", ""}}, 2},
		{"skip two", Profile{Skip: []string{"attn", "head"}}, 1},
		{"dup", Profile{Dup: []string{"ffn"}}, 4},
		{"empty strings match nothing", Profile{Skip: []string{""}, Dup: []string{""}}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(Options{Profile: c.prof})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			p, err := d.Pipeline("test/count", countSrc, []BindKind{ReadWrite})
			if err != nil {
				t.Fatal(err)
			}
			s, err := d.NewStorage("s", 16)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release()
			if err := d.Write(s, 0, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			g, err := d.BindGroup(p, "count", Whole(s))
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			var ds []Dispatch
			for _, l := range []string{"L0 attn", "L0 ffn", "head"} {
				ds = append(ds, Dispatch{P: p, G: g, X: 1, Y: 1, Z: 1, Label: l})
			}
			if err := d.Run(nil, ds, nil); err != nil {
				t.Fatal(err)
			}
			raw, err := d.ReadBuffer(s, 4)
			if err != nil {
				t.Fatal(err)
			}
			if got := uint32(raw[0]) | uint32(raw[1])<<8 | uint32(raw[2])<<16 | uint32(raw[3])<<24; got != c.want {
				t.Errorf("%d dispatches ran, want %d", got, c.want)
			}
		})
	}
}

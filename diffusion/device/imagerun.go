package device

import (
	"github.com/cogentcore/webgpu/wgpu"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// imgRun records the dispatches of one image-model evaluation (VAE decode,
// DiT step) for a single submission, with the temporary buffers and bind
// groups to release after it. The first error sticks; later calls do
// nothing.
type imgRun struct {
	d      *gpu.Device
	wts    map[*float32]*gpu.Buffer // uploaded weight arrays by their first element
	ds     []gpu.Dispatch
	temps  []*gpu.Buffer
	groups []*wgpu.BindGroup
	none   *gpu.Buffer
	err    error
}

func (r *imgRun) release() {
	for _, g := range r.groups {
		g.Release()
	}
	for _, b := range r.temps {
		b.Release()
	}
	r.groups, r.temps = nil, nil
}

// buf is a temporary storage buffer of n floats.
func (r *imgRun) buf(n int) *gpu.Buffer {
	if r.err != nil {
		return nil
	}
	b, err := r.d.NewStorage("img.act", uint64(max(4*n, 16)))
	if err != nil {
		r.err = err
		return nil
	}
	r.temps = append(r.temps, b)
	return b
}

// upload is a temporary buffer holding x.
func (r *imgRun) upload(x []float32) *gpu.Buffer {
	b := r.buf(len(x))
	if r.err == nil && len(x) > 0 {
		r.err = r.d.Write(b, 0, gpu.F32Bytes(x))
	}
	return b
}

func (r *imgRun) uniform(p shaders.Params) *gpu.Buffer {
	if r.err != nil {
		return nil
	}
	b, err := r.d.NewUniform("img.p", shaders.Pack(p))
	if err != nil {
		r.err = err
		return nil
	}
	r.temps = append(r.temps, b)
	return b
}

// dummy is a small buffer bound where a kernel reads nothing.
func (r *imgRun) dummy() *gpu.Buffer {
	if r.none == nil {
		r.none = r.buf(4)
	}
	return r.none
}

// w is the uploaded buffer of a weight array (a dummy for an absent one).
func (r *imgRun) w(x []float32) *gpu.Buffer {
	if len(x) == 0 {
		return r.dummy()
	}
	return r.wts[&x[0]]
}

// dispatch binds bufs to kernel name (its binding kinds from the kernel
// table) and queues it on a (x, y, z) grid.
func (r *imgRun) dispatch(name string, gx, gy, gz uint32, bufs ...*gpu.Buffer) {
	if r.err != nil {
		return
	}
	src, err := shaders.Source(name)
	if err != nil {
		r.err = err
		return
	}
	p, err := r.d.Pipeline("img/"+name, src, kinds(name))
	if err != nil {
		r.err = err
		return
	}
	bs := make([]gpu.Binding, len(bufs))
	for i, b := range bufs {
		bs[i] = gpu.Whole(b)
	}
	g, err := r.d.BindGroup(p, name, bs...)
	if err != nil {
		r.err = err
		return
	}
	r.groups = append(r.groups, g)
	r.ds = append(r.ds, gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: gz, Label: "img/" + name})
}

// bindingLimit is the largest activation binding (VAE bands, DiT
// batches): the device's storage binding and buffer limits,
// gpu.MaxBinding, and max when set, rounded down to whole words.
func bindingLimit(d *gpu.Device, max uint64) uint64 {
	lim := uint64(gpu.MaxBinding)
	l := d.Limits()
	for _, x := range []uint64{l.MaxStorageBufferBindingSize, l.MaxBufferSize, max} {
		if x > 0 && x < lim {
			lim = x
		}
	}
	return lim &^ 3
}

// grid spreads n invocations of wg-wide workgroups over (x, y).
func grid(n, wg int) (uint32, uint32) {
	g := (n + wg - 1) / wg
	if g <= 65535 {
		return uint32(max(g, 1)), 1
	}
	return 65535, uint32((g + 65534) / 65535)
}

// uploadWeights uploads float arrays once each (keyed by their first
// element) into bufs.
func uploadWeights(d *gpu.Device, wts map[*float32]*gpu.Buffer, bufs *[]*gpu.Buffer, xs ...[]float32) error {
	for _, x := range xs {
		if len(x) == 0 || wts[&x[0]] != nil {
			continue
		}
		b, err := d.NewStorage("img.weight", uint64(max(4*len(x), 16)))
		if err != nil {
			return err
		}
		*bufs = append(*bufs, b)
		if err := d.Write(b, 0, gpu.F32Bytes(x)); err != nil {
			return err
		}
		wts[&x[0]] = b
	}
	return nil
}

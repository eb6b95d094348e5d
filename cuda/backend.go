// Package cuda is the native CUDA backend: the whole model on one NVIDIA
// GPU through the driver API (package cuda/driver, loaded at run time, so
// the binary needs no CUDA toolkit and builds everywhere) and the CUDA C
// kernels of package cuda/kernels (PTX compiled ahead and embedded).
//
// Weights live on the device in their codecs (f32, f16, bf16, q8_0, q4_0,
// q4_K, q6_K), the KV cache is resident, prefill runs batched GEMMs and
// decode runs as a CUDA graph: k greedy steps per launch with the argmax on
// the device. What it cannot run it refuses (ErrUnsupported, naming the
// tensor or the layer feature): the engine then runs the CPU backend, and a
// device that fails mid-generation hands its sequence back to the CPU,
// which replays it, so the tokens are those of a CPU run.
package cuda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// ErrUnsupported is wrapped when the model needs something this backend
// does not run; the engine falls back to the CPU.
var ErrUnsupported = errors.New("unsupported")

// Options configure Open.
type Options struct {
	// Ordinal is the CUDA device (0 = the first).
	Ordinal int
	// Device, when set, is used instead of opening Ordinal (tests inject a
	// driver.Fake or driver.Faulty here). The backend closes it.
	Device driver.Device
	// Image is the kernel image (a fatbin, or PTX text); nil =
	// kernels.Image.
	Image []byte
	// VRAMBudget bounds the bytes the backend allocates (0 = the free
	// memory the driver reports, less 5%).
	VRAMBudget int64
	// Chunk is the most tokens one prefill step runs (0 = 2048: the
	// GEMMs fill the GPU better in one long step than in several short
	// ones; a session's chunk is at most its length).
	Chunk int
	// KVF16 keeps the KV cache in f16 (half the memory; the attention
	// kernels read it back to f32).
	KVF16 bool
	// Exact keeps f32 activations in the decode matvecs of quantized
	// weights (ck_mv_*), the f16 tensor-core GEMM (ck_gemm_*) in prefill
	// and f32 K/V in prefill attention; by default the matvecs round the
	// activation to int8 per 32 (ck_mvq_*: the CPU's Int8 mode, llama.cpp's
	// MMVQ), so do the prefill products of q8_0/q4_0/q4_K/q6_K weights
	// (ck_quant_q8 once per input, then ck_mmq_*: int8 tensor cores, as
	// llama.cpp's MMQ), and prefill attention runs on tensor cores with K/V
	// in f16 (ck_flash_prefill_*, head dims 64 and 128).
	Exact bool
	// From and To select the decoder layers [From, To) this backend holds
	// (To 0 = through the last): a part of a model split over devices
	// (Split). The part holding layer 0 embeds the tokens; the part
	// holding the last layer computes the logits.
	From, To int
	// Profile records an event around every kernel launch of Forward
	// (slow: one sync per kernel); Profile() reports the times.
	Profile bool
	// TwoPassDecode runs decode attention as two launches (the splits,
	// then ck_attn_combine) where the one-pass ck_attn_dec1_* would serve:
	// the kernels before it, for A/B runs and the parity tests of both.
	TwoPassDecode bool
	// PlainLaunches launches the decode graphs' kernels one after another
	// where they would be programmatic dependents (sm_90 with the embedded
	// fatbin: each kernel launched while the one before runs, waiting for
	// it in griddepcontrol): for A/B runs and the parity tests of both.
	PlainLaunches bool
}

// Backend is one model on one CUDA device.
type Backend struct {
	dev       driver.Device
	arch      *model.Arch
	opts      Options
	mod       driver.Module
	funcs     map[string]driver.Func
	name      string
	pads      []headPad // per model layer: its head dims and the device's (pad.go)
	layers    []layer   // layers [from, from+len(layers))
	from      int
	first     bool   // embeds (holds layer 0)
	postNorms bool   // some layer has a post-mixer or post-FFN norm
	last      bool   // computes the logits (holds the last layer)
	embd      matrix // token_embd
	out       matrix // output (or token_embd when tied)
	outNrm    driver.Ptr
	allocs    []driver.Ptr
	bytes     int64 // allocated
	budget    int64

	// pdl: the decode graphs' kernels may be programmatic dependents
	// (kernels.Dependent, the device's Info().PDL, not PlainLaunches);
	// dependent: launch them so now (while a graph is captured).
	pdl, dependent bool

	mu    sync.Mutex // one session computes at a time (one stream)
	stats backend.Stats
	prof  map[string]*kernelTime
}

type kernelTime struct {
	Calls int
	MS    float64
}

// KernelTime is the GPU time of one kernel over the profiled launches.
type KernelTime struct {
	Name  string
	Calls int
	MS    float64
}

// Profile returns the per-kernel GPU times recorded since the last call
// (Options.Profile; empty otherwise), most time first, and resets them.
func (b *Backend) Profile() []KernelTime {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []KernelTime
	for n, k := range b.prof {
		out = append(out, KernelTime{n, k.Calls, k.MS})
	}
	slices.SortFunc(out, func(x, y KernelTime) int { return cmp.Compare(y.MS, x.MS) })
	if b.prof != nil {
		b.prof = map[string]*kernelTime{}
	}
	return out
}

// matrix is a weight on the device.
type matrix struct {
	ptr        driver.Ptr
	codec      string
	rows, cols int
	rowBytes   int
}

type layer struct {
	spec                                    model.Layer
	attnNorm, postAttnNorm, ffnNorm, postFF driver.Ptr
	q, k, v, o                              matrix
	qkv                                     matrix // [q;k;v] rows in one matrix (0 when their codecs differ)
	qk                                      matrix // else [q;k] rows in one where ck_mvq2_ pairs them with v
	// q, k and v biases (qwen2), each repeated for biasRows rows: the R input
	// of the products ([T][rows], added to y); bqkv is one row of [q|k|v].
	bq, bk, bv, bqkv driver.Ptr
	qNorm, kNorm     driver.Ptr
	qkEps            float32 // the q/k norms' epsilon and (1+w) flag: padded heads
	qkPlusOne        int32   // pre-scale their weights (pad.go)
	invFreq          driver.Ptr
	mscale           float32
	gate, up, down   matrix
}

// Open opens the CUDA device and uploads the model, or refuses it.
func Open(ctx context.Context, m *model.Model, opts Options) (*Backend, error) {
	if err := Check(&m.Arch); err != nil {
		if opts.Device != nil {
			opts.Device.Close()
		}
		return nil, err
	}
	// Heads narrower than the kernels take are padded (pad.go); the
	// backend runs the padded model and converts exported state back.
	pm, pads, err := padHeads(m)
	if err != nil {
		if opts.Device != nil {
			opts.Device.Close()
		}
		return nil, err
	}
	orig := m
	m = pm
	dev := opts.Device
	if dev == nil {
		d, err := OpenDevice(opts.Ordinal)
		if err != nil {
			return nil, err
		}
		dev = d
	}
	b := &Backend{dev: dev, arch: &m.Arch, opts: opts, funcs: map[string]driver.Func{}, pads: pads}
	if len(orig.Arch.Layers) != len(m.Arch.Layers) {
		return nil, fmt.Errorf("cuda: internal: padded model of %d layers", len(m.Arch.Layers))
	}
	if opts.Chunk <= 0 {
		b.opts.Chunk = 2048
	}
	info := dev.Info()
	b.name = deviceName(info)
	if to := cmp.Or(opts.To, len(m.Arch.Layers)); opts.From != 0 || to != len(m.Arch.Layers) {
		b.name += fmt.Sprintf("[%d-%d]", opts.From, to-1)
	}
	if err := b.load(ctx, m); err != nil {
		b.Close()
		return nil, err
	}
	b.stats.ResidentBytes = b.bytes
	// A decode step reads every projection once, and the head.
	for _, l := range b.layers {
		for _, w := range []matrix{l.q, l.k, l.v, l.o, l.gate, l.up, l.down} {
			b.stats.WeightBytesToken += int64(w.rows) * int64(w.rowBytes)
		}
	}
	if b.last {
		b.stats.WeightBytesToken += int64(b.out.rows) * int64(b.out.rowBytes)
	}
	if opts.Profile {
		b.prof = map[string]*kernelTime{}
	}
	return b, nil
}

// deviceName is a whole-model backend's Name on the device (identify's too).
func deviceName(info driver.Info) string { return fmt.Sprintf("cuda:%d:%s", info.Ordinal, info.Name) }

// OpenDevice opens a CUDA device when Options.Device is nil: the driver's
// primary context by default. Tests replace it to inject faults into the
// device an engine opens (driver.Faulty over a driver.Fake or the real one).
var OpenDevice = func(ordinal int) (driver.Device, error) {
	c, err := driver.Open(ordinal)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// errUnsupportedPTX is CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
const errUnsupportedPTX = 222

// Check reports whether the kernels can run an architecture.
func Check(a *model.Arch) error {
	switch a.Act {
	case model.ActSiLU, model.ActGELUTanh:
	default:
		return fmt.Errorf("cuda: %w: activation %q", ErrUnsupported, a.Act)
	}
	if a.Hidden%kernels.GemmBK != 0 {
		return fmt.Errorf("cuda: %w: hidden %d is not a multiple of %d", ErrUnsupported, a.Hidden, kernels.GemmBK)
	}
	for i, l := range a.Layers {
		if l.Mixer != model.MixerAttention {
			return fmt.Errorf("cuda: %w: layer %d mixer %q", ErrUnsupported, i, l.Mixer)
		}
		if l.FFN != model.FFNDense {
			return fmt.Errorf("cuda: %w: layer %d FFN %q", ErrUnsupported, i, l.FFN)
		}
		at := l.Attn
		switch {
		case at.OutBias:
			return fmt.Errorf("cuda: %w: layer %d attention output bias", ErrUnsupported, i)
		case at.Sinks:
			return fmt.Errorf("cuda: %w: layer %d attention sinks", ErrUnsupported, i)
		case at.OutputGate:
			return fmt.Errorf("cuda: %w: layer %d attention output gate", ErrUnsupported, i)
		}
		hd := at.HeadDim
		if hd < minHeadDim && hd >= 4 && hd%4 == 0 {
			hd = minHeadDim // padded (pad.go)
		}
		if (at.Heads*hd)%kernels.GemmBK != 0 {
			return fmt.Errorf("cuda: %w: layer %d attention width %d is not a multiple of %d", ErrUnsupported, i, at.Heads*hd, kernels.GemmBK)
		}
		if err := kernels.CheckAttention(at.Heads, at.KVHeads, hd); err != nil {
			return fmt.Errorf("cuda: %w: layer %d: %v", ErrUnsupported, i, err)
		}
		switch at.Rope.Style {
		case model.RopeNeoX, model.RopeInterleaved:
		default:
			if at.Rope.Dims != 0 {
				return fmt.Errorf("cuda: %w: layer %d rope style %q", ErrUnsupported, i, at.Rope.Style)
			}
		}
	}
	return nil
}

func (b *Backend) alloc(n int64) (driver.Ptr, error) {
	if b.budget > 0 && b.bytes+n > b.budget {
		return 0, fmt.Errorf("cuda: %w: %d MiB more would pass the device budget of %d MiB", ErrUnsupported, n>>20, b.budget>>20)
	}
	p, err := b.dev.Alloc(n)
	if err != nil {
		return 0, err
	}
	b.allocs = append(b.allocs, p)
	b.bytes += n
	return p, nil
}

func (b *Backend) load(ctx context.Context, m *model.Model) error {
	free, _, err := b.dev.MemInfo()
	if err != nil {
		return err
	}
	b.budget = free - free/20
	if b.opts.VRAMBudget > 0 {
		b.budget = min(b.budget, b.opts.VRAMBudget)
	}
	image := b.opts.Image
	if image == nil {
		image = kernels.Image
	}
	if _, real := b.dev.(*driver.Context); real && len(image) == 0 {
		return fmt.Errorf("cuda: %w: this binary carries no kernel image (run make cuda-kernels)", ErrUnsupported)
	}
	info := b.dev.Info()
	b.pdl = info.PDL && kernels.Dependent(image, info.Major, info.Minor) && !b.opts.PlainLaunches
	if b.mod, err = b.dev.Load(image); err != nil {
		if driver.Code(err) == errUnsupportedPTX {
			return fmt.Errorf("cuda: loading the kernels: %w (the driver, CUDA %s, is older than the kernels' PTX: an NVIDIA driver for CUDA 13, 580 or newer, is needed)",
				err, driver.DriverString(b.dev.Info().DriverVersion))
		}
		return fmt.Errorf("cuda: loading the kernels: %w", err)
	}
	a := &m.Arch
	from, to := b.opts.From, b.opts.To
	if to == 0 {
		to = len(a.Layers)
	}
	if from < 0 || from >= to || to > len(a.Layers) {
		return fmt.Errorf("cuda: layers %d..%d of a %d-layer model", from, to-1, len(a.Layers))
	}
	b.from, b.first, b.last = from, from == 0, to == len(a.Layers)
	if b.first {
		if b.embd, err = b.matrix(m, model.TokenEmbd, a.Vocab, a.Hidden); err != nil {
			return err
		}
	}
	if b.last {
		if a.TiedEmbeddings && b.first {
			b.out = b.embd
		} else {
			name := model.Output
			if a.TiedEmbeddings {
				name = model.TokenEmbd
			}
			if b.out, err = b.matrix(m, name, a.Vocab, a.Hidden); err != nil {
				return err
			}
		}
		if b.outNrm, err = b.vector(m, model.OutputNorm, a.Hidden, true); err != nil {
			return err
		}
	}
	b.layers = make([]layer, to-from)
	for _, l := range a.Layers[from:to] {
		b.postNorms = b.postNorms || l.PostMixerNorm || l.PostFFNNorm
	}
	for i := from; i < to; i++ {
		spec := a.Layers[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		l := &b.layers[i-from]
		l.spec = spec
		l.qkEps, l.qkPlusOne = a.NormEps, plusOne(a)
		if p := b.pads[i]; p.padded() {
			l.qkEps, l.qkPlusOne = a.NormEps*float32(p.hd)/float32(p.dev), 0
		}
		pre := fmt.Sprintf("blk.%d.", i)
		at := spec.Attn
		vecs := []struct {
			dst  *driver.Ptr
			name string
			n    int
			want bool
		}{
			{&l.attnNorm, model.AttnNorm, a.Hidden, spec.PreMixerNorm},
			{&l.postAttnNorm, model.PostAttnNorm, a.Hidden, spec.PostMixerNorm},
			{&l.ffnNorm, model.FFNNorm, a.Hidden, spec.PreFFNNorm},
			{&l.postFF, model.PostFFNNorm, a.Hidden, spec.PostFFNNorm},
			{&l.qNorm, model.AttnQNorm, qkNormLen(at, at.Heads), at.QKNorm != model.QKNormNone},
			{&l.kNorm, model.AttnKNorm, qkNormLen(at, at.KVHeads), at.QKNorm != model.QKNormNone},
		}
		for _, v := range vecs {
			if !v.want {
				continue
			}
			if *v.dst, err = b.vector(m, pre+v.name, v.n, true); err != nil {
				return err
			}
		}
		qd, kvd := at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
		if l.o, err = b.matrix(m, pre+model.AttnOut, a.Hidden, qd); err != nil {
			return err
		}
		if err := b.qkvMatrices(m, pre, l, qd, kvd); err != nil {
			return err
		}
		if at.Bias {
			if err := b.biases(m, pre, l, qd, kvd); err != nil {
				return err
			}
		}
		// The FFN width is padded to a multiple of GemmBK with zero rows of
		// gate and up (act(0)·0 = 0) and zero columns of down, so the
		// kernels see whole blocks and the sums are unchanged.
		ff := ffnWidth(spec.FFNHidden)
		if l.gate, err = b.padded(m, pre+model.FFNGate, spec.FFNHidden, a.Hidden, ff, a.Hidden); err != nil {
			return err
		}
		if l.up, err = b.padded(m, pre+model.FFNUp, spec.FFNHidden, a.Hidden, ff, a.Hidden); err != nil {
			return err
		}
		if l.down, err = b.padded(m, pre+model.FFNDown, a.Hidden, spec.FFNHidden, a.Hidden, ff); err != nil {
			return err
		}
		if at.Rope.Dims > 0 {
			inv, ms, err := model.RopeFrequencies(at.Rope)
			if err != nil {
				return fmt.Errorf("cuda: %w: layer %d: %v", ErrUnsupported, i, err)
			}
			if l.invFreq, err = b.upload(driver.Bytes(inv)); err != nil {
				return err
			}
			l.mscale = ms
		}
	}
	return nil
}

func (b *Backend) upload(data []byte) (driver.Ptr, error) {
	p, err := b.alloc(int64(len(data)))
	if err != nil {
		return 0, err
	}
	return p, b.dev.Upload(p, data)
}

// tensor reads a weight with the shape the arch implies.
func readTensor(m *model.Model, name string, rows, cols int) (*tensor.Tensor, error) {
	t, ok := m.Weights.Tensor(name)
	if !ok {
		if err := model.WeightsErr(m.Weights); err != nil {
			return nil, fmt.Errorf("cuda: %s: %w", name, err)
		}
		return nil, fmt.Errorf("cuda: missing tensor %s", name)
	}
	if t.Rows() != rows || t.Cols() != cols {
		return nil, fmt.Errorf("cuda: tensor %s has shape %v, want [%d %d]", name, t.Shape, rows, cols)
	}
	return t, nil
}

// vector uploads a small weight (a norm) as f32.
func (b *Backend) vector(m *model.Model, name string, n int, _ bool) (driver.Ptr, error) {
	t, err := readTensor(m, name, 1, n)
	if err != nil {
		return 0, err
	}
	f := make([]float32, n)
	if err := tensor.Dequantize(f, t.Codec, t.Data); err != nil {
		return 0, fmt.Errorf("cuda: %s: %w", name, err)
	}
	return b.upload(driver.Bytes(f))
}

// matrix uploads a projection in its codec, repacked as the kernels read it.
func (b *Backend) matrix(m *model.Model, name string, rows, cols int) (matrix, error) {
	t, err := readTensor(m, name, rows, cols)
	if err != nil {
		return matrix{}, err
	}
	return b.upmatrix(t, name, rows, cols)
}

// upmatrix uploads tensor t (named name in errors) as a rows×cols matrix.
func (b *Backend) upmatrix(t *tensor.Tensor, name string, rows, cols int) (matrix, error) {
	codec := t.Codec.String()
	if !kernels.Supported(codec) {
		return matrix{}, fmt.Errorf("cuda: %w: tensor %s is %s (the kernels run %v)", ErrUnsupported, name, codec, kernels.Codecs)
	}
	if err := kernels.CheckMatrix(codec, rows, cols, codec != "f32"); err != nil {
		return matrix{}, fmt.Errorf("cuda: %w: tensor %s: %v", ErrUnsupported, name, err)
	}
	rb := kernels.DeviceRowBytes(codec, cols)
	dst := make([]byte, rows*rb)
	if err := kernels.Repack(codec, rows, cols, t.Data, dst); err != nil {
		return matrix{}, fmt.Errorf("cuda: %s: %w", name, err)
	}
	p, err := b.upload(dst)
	if err != nil {
		return matrix{}, err
	}
	return matrix{ptr: p, codec: codec, rows: rows, cols: cols, rowBytes: rb}, nil
}

// qkvMatrices uploads q, k and v. When they share a codec they sit in one
// matrix of [q;k;v] rows (one decode matvec for the three); l.q, l.k and
// l.v are then views of its row ranges, which prefill multiplies apart.
func (b *Backend) qkvMatrices(m *model.Model, pre string, l *layer, qd, kvd int) error {
	H := b.arch.Hidden
	var ts [3]*tensor.Tensor
	for i, x := range []struct {
		name string
		rows int
	}{{model.AttnQ, qd}, {model.AttnK, kvd}, {model.AttnV, kvd}} {
		t, err := readTensor(m, pre+x.name, x.rows, H)
		if err != nil {
			return err
		}
		ts[i] = t
	}
	if ts[0].Codec == ts[1].Codec && ts[0].Codec != ts[2].Codec && !b.opts.Exact && qd+kvd < kernels.PairRows &&
		kernels.MatvecPairName(ts[0].Codec.String(), ts[2].Codec.String()) != "" {
		// [q;k] in one matrix, v apart: one ck_mvq2_ launch decodes the three.
		qk := &tensor.Tensor{Name: pre + "attn_qk", Codec: ts[0].Codec, Shape: []int{qd + kvd, H}}
		qk.Data = append(append([]byte(nil), ts[0].Data...), ts[1].Data...)
		w, err := b.upmatrix(qk, pre+model.AttnQ+"+k", qd+kvd, H)
		if err != nil {
			return err
		}
		l.qk = w
		l.q, l.k = w, w
		l.q.rows = qd
		l.k.ptr += driver.Ptr(qd * w.rowBytes)
		l.k.rows = kvd
		l.v, err = b.matrix(m, pre+model.AttnV, kvd, H)
		return err
	}
	if ts[0].Codec != ts[1].Codec || ts[0].Codec != ts[2].Codec {
		var err error
		if l.q, err = b.matrix(m, pre+model.AttnQ, qd, H); err != nil {
			return err
		}
		if l.k, err = b.matrix(m, pre+model.AttnK, kvd, H); err != nil {
			return err
		}
		l.v, err = b.matrix(m, pre+model.AttnV, kvd, H)
		return err
	}
	fused := &tensor.Tensor{Name: pre + "attn_qkv", Codec: ts[0].Codec, Shape: []int{qd + 2*kvd, H}}
	fused.Data = append(append(append([]byte(nil), ts[0].Data...), ts[1].Data...), ts[2].Data...)
	w, err := b.upmatrix(fused, pre+model.AttnQ+"+k+v", qd+2*kvd, H)
	if err != nil {
		return err
	}
	l.qkv = w
	view := func(row0, rows int) matrix {
		v := w
		v.ptr += driver.Ptr(row0 * w.rowBytes)
		v.rows = rows
		return v
	}
	l.q, l.k, l.v = view(0, qd), view(qd, kvd), view(qd+kvd, kvd)
	return nil
}

// biasRows is how many rows the repeated biases hold: a longer product
// runs in pieces of this many rows.
const biasRows = 512

// biases uploads the q, k and v biases repeated for biasRows rows (the
// products add their R input row by row), and one row of [q|k|v] for the
// fused single-token matvec.
func (b *Backend) biases(m *model.Model, pre string, l *layer, qd, kvd int) error {
	var all []float32
	for _, x := range []struct {
		dst  *driver.Ptr
		name string
		n    int
	}{{&l.bq, model.AttnQBias, qd}, {&l.bk, model.AttnKBias, kvd}, {&l.bv, model.AttnVBias, kvd}} {
		t, err := readTensor(m, pre+x.name, 1, x.n)
		if err != nil {
			return err
		}
		v := make([]float32, x.n)
		if err := tensor.Dequantize(v, t.Codec, t.Data); err != nil {
			return fmt.Errorf("cuda: %s: %w", pre+x.name, err)
		}
		all = append(all, v...)
		rep := make([]float32, 0, biasRows*x.n)
		for range biasRows {
			rep = append(rep, v...)
		}
		if *x.dst, err = b.upload(driver.Bytes(rep)); err != nil {
			return err
		}
	}
	var err error
	l.bqkv, err = b.upload(driver.Bytes(all))
	return err
}

// qkNormLen is the length of a q or k norm weight: one head's (per head)
// or the whole projection's (full).
func qkNormLen(at *model.Attention, heads int) int {
	if at.QKNorm == model.QKNormFull {
		return heads * at.HeadDim
	}
	return at.HeadDim
}

// ffnWidth is the FFN width on the device: a multiple of the GEMM's
// column step.
func ffnWidth(n int) int { return (n + kernels.GemmBK - 1) / kernels.GemmBK * kernels.GemmBK }

// padded uploads a plain-codec (f32/f16/bf16) rows×cols weight as a
// prows×pcols one with zeros around it; a weight already of that shape
// goes through matrix.
func (b *Backend) padded(m *model.Model, name string, rows, cols, prows, pcols int) (matrix, error) {
	if rows == prows && cols == pcols {
		return b.matrix(m, name, rows, cols)
	}
	t, err := readTensor(m, name, rows, cols)
	if err != nil {
		return matrix{}, err
	}
	codec := t.Codec.String()
	if !kernels.Supported(codec) || kernels.BlockLen(codec) != 1 {
		return matrix{}, fmt.Errorf("cuda: %w: tensor %s: %d×%d %s (a width of a multiple of 32 is needed for block codecs)", ErrUnsupported, name, rows, cols, codec)
	}
	es := len(t.Data) / (rows * cols)
	src := make([]byte, prows*pcols*es)
	for r := range rows {
		copy(src[r*pcols*es:], t.Data[r*cols*es:(r+1)*cols*es])
	}
	rb := kernels.DeviceRowBytes(codec, pcols)
	dst := make([]byte, prows*rb)
	if err := kernels.Repack(codec, prows, pcols, src, dst); err != nil {
		return matrix{}, fmt.Errorf("cuda: %s: %w", name, err)
	}
	p, err := b.upload(dst)
	if err != nil {
		return matrix{}, err
	}
	return matrix{ptr: p, codec: codec, rows: prows, cols: pcols, rowBytes: rb}, nil
}

// fn returns a kernel, loading it on first use.
func (b *Backend) fn(name string, shared uint32) (driver.Func, error) {
	if f, ok := b.funcs[name]; ok {
		return f, nil
	}
	f, err := b.dev.Function(b.mod, name)
	if err != nil {
		return 0, err
	}
	if shared > 48<<10 {
		if err := b.dev.SetSharedLimit(f, int(shared)); err != nil {
			return 0, fmt.Errorf("%w: kernel %s with %d bytes of shared memory", err, name, shared)
		}
	}
	b.funcs[name] = f
	return f, nil
}

// int8mv launches a MatvecArgs as ck_mvq_* with its geometry.
type int8mv struct{ *kernels.MatvecArgs }

func (a int8mv) Launch() kernels.Geometry { return a.LaunchInt8() }

// matvec launches y = W·x, or the fused GLU with a.W2, in the codec's
// int8 form unless Options.Exact asks otherwise or the kernels have none.
func (b *Backend) matvec(codec string, a *kernels.MatvecArgs) error {
	if !b.opts.Exact && slices.Contains(kernels.Int8Codecs, codec) {
		return b.launch(kernels.MatvecInt8Prefix+codec, int8mv{a})
	}
	return b.launch(kernels.MatvecPrefix+codec, a)
}

// launchable is a kernels.XxxArgs.
type launchable interface {
	Params() []unsafe.Pointer
	Launch() kernels.Geometry
}

// launch runs kernel name with a's arguments and geometry. Each parameter
// is copied into an 8-byte slot (a 4-byte one is read with the bytes after
// it, which the driver ignores: every Args struct is 8-byte aligned, so
// the read stays inside it).
func (b *Backend) launch(name string, a launchable) error {
	g := a.Launch()
	f, err := b.fn(name, g.Shared)
	if err != nil {
		return err
	}
	ps := a.Params()
	var slots [32]driver.Arg
	args := slots[:len(ps)]
	for i, p := range ps {
		args[i] = driver.Arg(*(*uint64)(p))
	}
	grid := driver.Dim3{X: g.Grid[0], Y: g.Grid[1], Z: g.Grid[2]}
	block := driver.Dim3{X: g.Block[0], Y: g.Block[1], Z: g.Block[2]}
	if b.prof != nil {
		return b.timed(name, func() error { return b.dev.Launch(f, grid, block, int(g.Shared), args...) })
	}
	launch := b.dev.Launch
	if b.dependent {
		launch = b.dev.LaunchDependent
	}
	if err := launch(f, grid, block, int(g.Shared), args...); err != nil {
		return fmt.Errorf("%w (kernel %s)", err, name)
	}
	return nil
}

func (b *Backend) timed(name string, run func() error) error {
	e0, err := b.dev.Record()
	if err != nil {
		return err
	}
	defer b.dev.DestroyEvent(e0)
	if err := run(); err != nil {
		return err
	}
	e1, err := b.dev.Record()
	if err != nil {
		return err
	}
	defer b.dev.DestroyEvent(e1)
	if err := b.dev.Sync(); err != nil {
		return err
	}
	ms, err := b.dev.Elapsed(e0, e1)
	if err != nil {
		return err
	}
	k := b.prof[name]
	if k == nil {
		k = &kernelTime{}
		b.prof[name] = k
	}
	k.Calls++
	k.MS += float64(ms)
	return nil
}

// Name is "cuda:<ordinal>:<device name>".
func (b *Backend) Name() string { return b.name }

// Stats reports the backend's counters.
func (b *Backend) Stats() backend.Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	if s.Tokens > 0 {
		s.SubmitsPerToken = float64(s.Submits) / float64(s.Tokens)
	}
	return s
}

// Close frees the weights and closes the device.
func (b *Backend) Close() error {
	if b.dev == nil {
		return nil
	}
	for _, p := range b.allocs {
		b.dev.Free(p)
	}
	b.allocs = nil
	err := b.dev.Close()
	b.dev = nil
	return err
}

var _ backend.Backend = (*Backend)(nil)
var _ backend.StatsReporter = (*Backend)(nil)

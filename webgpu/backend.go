// Package webgpu is cortiq's native WebGPU backend: the forward pass of a
// model.Arch (attention, LFM2 short-conv and qwen3_next gated-DeltaNet
// mixers; dense or routed mixture-of-experts FFNs) on one GPU through
// wgpu-native, with the kernels of package shaders. MoE routing and the
// mixers' recurrent state stay on the device (see moe.go, hybrid.go).
//
// Contract, as the engine facade relies on it:
//   - New refuses (an error, nothing allocated left behind) what it cannot run
//     exactly: unknown mixers, unsupported codecs or shapes. Errors wrap
//     ErrNoAdapter when there is no GPU and ErrUnsupported for the model.
//   - Session.Forward returns the same logits as the CPU reference (to float32
//     rounding) or an error; never partial results. After an error the session
//     is unusable and the facade replays the sequence on the CPU.
//   - Weights are uploaded once at New and stay resident. A session's KV
//     cache, activations and bind groups are created once at NewSession.
//   - One decode step is one command buffer, one submit, one readback of the
//     logits (or of k picked ids with ForwardGreedy). A prompt runs in chunks
//     of Options.Chunk positions, one submit per chunk.
//   - When the model does not fit Options.VRAMBudget (or Options.Layers
//     says so), the device holds a subset of layers and its sessions are
//     backend.SplitSessions: the scheduler (package engine) runs the rest
//     on the CPU, the hidden state crossing at each boundary. This package
//     never calls another backend.
package webgpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// ErrUnsupported is wrapped when the model needs something this backend does
// not compute; the facade should use the CPU backend.
var ErrUnsupported = errors.New("unsupported")

// Options configure the backend. The zero value runs everything on the
// device with its own adapter.
type Options struct {
	// VRAMBudget bounds the bytes of weights kept on the device (0 = no
	// bound but the device's). When the model does not fit, the leading
	// layers that fit run on the device (embedding and head always do) and
	// the scheduler runs the rest. Sessions (KV cache, activations) allocate beyond
	// it unless ReserveContext is set.
	VRAMBudget int64
	// ReserveContext, with a VRAMBudget, sets aside the memory of one
	// session of that many positions (SessionBytes, as if every layer were
	// on the device) before placing layers; New refuses, naming what the
	// context needs, when the embedding, head and that session alone do
	// not fit.
	ReserveContext int
	// Layers selects the device layers, CORTIQ_GPU_LAYERS syntax
	// ("0-9,20-29"); empty makes every layer eligible.
	Layers string
	// Chunk is the number of prompt positions per prefill submit (default
	// 512: the tiled GEMM needs hundreds of tokens to fill a large GPU;
	// fewer when an activation buffer would outgrow a storage binding, and
	// at most moeChunk with routed experts).
	// Steps that return every position's logits go in chunks of at most
	// headChunk.
	Chunk int
	// Device, when set, is used instead of opening one; the backend does not
	// close it.
	Device *gpu.Device
	// RewindDepth is the number of per-step recurrent states a session of
	// a model with short-conv or DeltaNet layers keeps, so Rewind can drop
	// that many of its newest positions (0 = backend.DefaultRewindDepth).
	// Each costs one more copy of the layers' recurrent state in memory;
	// a step writes only the states of its last RewindDepth+1 tokens.
	RewindDepth int
	// KVF16 keeps the KV caches in half precision (two halves per u32,
	// pack2x16float): half the memory and the bandwidth of attention, at
	// a rounding of keys and values to 11 significant bits.
	KVF16 bool
	// FullKV keeps every position of sliding-window layers (one KV row per
	// position) instead of a ring of the window plus a step and the
	// rewind depth: the layout before rings, for comparisons.
	FullKV bool
	// Tuning sets the kernels' geometry (zero value: the defaults).
	Tuning Tuning
}

// Backend runs one model on one device.
type Backend struct {
	arch    *model.Arch
	dev     *gpu.Device
	ownsDev bool
	opts    Options
	tune    Tuning // opts.Tuning with the defaults filled in

	emb       *dweight
	embScale  float32
	head      *dweight
	finalNorm *gpu.Buffer
	layers    []*dlayer // nil where the layer runs off the device

	zero *gpu.Buffer // bound where a kernel's optional input is absent

	maxQKV, maxFFN, maxAtt int
	maxHeads, maxHD        int
	blrRank                int // the largest inner dimension of a two-product weight (blr): its scratch

	stats struct {
		sync.Mutex
		resident, upload int64
		submits, tokens  int64
	}
	tokenWeightBytes int64
	closed           atomic.Bool
}

type dlayer struct {
	spec                                         *model.Layer
	at                                           *model.Attention
	attnNorm, postAttnNorm, ffnNorm, postFFNNorm *gpu.Buffer
	qkv                                          []*dweight    // fused [q;k;v] or q, k, v
	qkvBias                                      *gpu.Buffer   // [q|k|v] biases (fused qkv) or nil
	biasParts                                    []*gpu.Buffer // q, k, v biases (separate projections)
	qNorm, kNorm                                 *gpu.Buffer   // full-width q/k norm weights
	o                                            *dweight
	oBias                                        *gpu.Buffer
	sinks                                        []float32   // attention sinks per head, nil when none
	qkn                                          *gpu.Buffer // [q norm | k norm] or nil
	knOff                                        int
	gu                                           []*dweight // fused and interleaved (see guInterleaved) or gate, up
	guInterleaved                                bool       // gu[0] rows are gate 0, up 0, gate 1, up 1, ...
	down                                         *dweight
	rope                                         *model.RopeTable // nil on a NoPE layer
	qw, kvw, f                                   int
	moe                                          *dmoe    // routed experts instead of gu/down
	conv                                         *dconv   // short-conv mixer (o is its out projection)
	delta                                        *ddelta  // gated-DeltaNet mixer (o is its out projection)
	qGate                                        *dweight // attention output gate rows of q_proj, or nil
}

// New uploads m's weights to a device and prepares the kernels: NewContext
// with a context that is never done.
func New(m *model.Model, opts Options) (*Backend, error) {
	return NewContext(context.Background(), m, opts)
}

// NewContext uploads m's weights to a device and prepares the kernels. A
// done ctx stops the upload between two weights (or two row ranges of a
// large one): NewContext then returns ctx's error, having released every
// buffer it made and the device if it opened one.
func NewContext(ctx context.Context, m *model.Model, opts Options) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a := &m.Arch
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("webgpu: %w", err)
	}
	if err := checkArch(a); err != nil {
		return nil, err
	}
	if err := checkCodecs(m); err != nil {
		return nil, err
	}
	if opts.Chunk <= 0 {
		opts.Chunk = 512
	}
	tune, err := opts.Tuning.resolve()
	if err != nil {
		return nil, err
	}
	allowed, err := ParseLayerRanges(opts.Layers, len(a.Layers))
	if err != nil {
		return nil, fmt.Errorf("webgpu: %w", err)
	}
	b := &Backend{arch: a, opts: opts, tune: tune}
	b.dev = opts.Device
	if b.dev == nil {
		b.dev, err = gpu.Open(gpu.Options{})
		if err != nil {
			return nil, err
		}
		b.ownsDev = true
	}
	ok := false
	defer func() {
		if !ok {
			b.Close()
		}
	}()
	if err := b.load(ctx, m, allowed); err != nil {
		return nil, err
	}
	if err := b.dev.Flush(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.buildPipelines(); err != nil {
		return nil, err
	}
	ok = true
	return b, nil
}

// checkArch refuses what the kernels do not compute.
func checkArch(a *model.Arch) error {
	if a.Hidden%4 != 0 {
		return fmt.Errorf("webgpu: %w: hidden %d is not a multiple of 4", ErrUnsupported, a.Hidden)
	}
	for i, l := range a.Layers {
		if err := checkMixer(i, &l); err != nil {
			return err
		}
		switch {
		case l.FFN == model.FFNMoE && l.MoE != nil:
			if err := checkMoE(i, l.MoE, a); err != nil {
				return err
			}
		case l.FFN != model.FFNDense:
			return fmt.Errorf("webgpu: %w: layer %d FFN %q", ErrUnsupported, i, l.FFN)
		case l.FFNHidden%4 != 0:
			return fmt.Errorf("webgpu: %w: layer %d FFN width %d", ErrUnsupported, i, l.FFNHidden)
		}
		at := l.Attn
		if at == nil {
			continue
		}
		if at.OutputGate && at.Bias {
			return fmt.Errorf("webgpu: %w: layer %d attention output gate with q bias", ErrUnsupported, i)
		}
		if at.HeadDim > 256 || at.HeadDim%4 != 0 {
			return fmt.Errorf("webgpu: %w: layer %d head_dim %d (kernels take multiples of 4 up to 256)", ErrUnsupported, i, at.HeadDim)
		}
	}
	switch a.Act {
	case model.ActSiLU, model.ActGELUTanh:
	case model.ActSwiGLUOAI:
		// Only the routed-expert kernels compute it (gpt-oss has no dense
		// FFN and no shared expert).
		for i, l := range a.Layers {
			if l.FFN != model.FFNMoE {
				return fmt.Errorf("webgpu: %w: layer %d dense FFN with the %s activation", ErrUnsupported, i, a.Act)
			}
		}
	default:
		return fmt.Errorf("webgpu: %w: activation %q", ErrUnsupported, a.Act)
	}
	return nil
}

func (b *Backend) tensor(m *model.Model, name string) (*tensor.Tensor, error) {
	t, ok := m.Weights.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("webgpu: missing tensor %q", name)
	}
	return t, nil
}

func (b *Backend) uploadWeight(label string, ts ...*tensor.Tensor) (*dweight, error) {
	if d := shaders.DeviceCodecOf(ts[0].Codec); d != nil && d.Stages != nil {
		return b.uploadStaged(label, d, ts)
	}
	if len(ts) > 1 {
		if dw, ok, err := b.uploadParts(label, ts); ok {
			return dw, err
		}
	}
	data, codec, rows, cols, soff, err := encodeForDevice(ts)
	if err != nil {
		return nil, err
	}
	buf, err := b.dev.Upload(label, data)
	if err != nil {
		return nil, err
	}
	b.stats.resident += int64(buf.Size())
	b.stats.upload += int64(len(data))
	return &dweight{name: label, buf: buf, codec: codec, rows: rows, cols: cols, soff: soff, bytes: int64(len(data))}, nil
}

func (b *Backend) uploadF32(label string, v []float32) (*gpu.Buffer, error) {
	buf, err := b.dev.Upload(label, gpu.F32Bytes(v))
	if err != nil {
		return nil, err
	}
	b.stats.resident += int64(buf.Size())
	b.stats.upload += int64(4 * len(v))
	return buf, nil
}

func (b *Backend) uploadVec(m *model.Model, name string, n int) (*gpu.Buffer, error) {
	t, err := b.tensor(m, name)
	if err != nil {
		return nil, err
	}
	v, err := vectorF32(t, n)
	if err != nil {
		return nil, err
	}
	return b.uploadF32(name, v)
}

// sameCodec reports whether ts can be fused into one device weight.
func sameCodec(ts ...*tensor.Tensor) bool {
	if shaders.Staged(ts[0].Codec) {
		return len(ts) == 1 // two products each: never fused
	}
	for _, t := range ts[1:] {
		if t.Codec != ts[0].Codec || t.Cols() != ts[0].Cols() {
			return false
		}
	}
	return true
}

// layerBytes estimates the device bytes of layer i's weights.
func layerBytes(m *model.Model, i int) int64 {
	var n int64
	for _, name := range m.Weights.Names() {
		if len(name) > 4 && name[:4] == "blk." {
			var li int
			if _, err := fmt.Sscanf(name, "blk.%d.", &li); err == nil && li == i {
				// Shape and codec only: reading every tensor to size it
				// doubled the reads of a model loaded lazily from a file.
				c, shape, err := weightInfo(m, name)
				if err != nil {
					continue
				}
				t := tensor.Tensor{Codec: c, Shape: shape}
				n += deviceBytes(c, t.Rows(), t.Cols())
			}
		}
	}
	return n
}

func (b *Backend) load(ctx context.Context, m *model.Model, allowed []bool) error {
	a := b.arch
	// Headers only here: the embedding and head are read (in row ranges
	// where the weights allow) when uploaded.
	embT, err := tensorHeader(m, model.TokenEmbd)
	if err != nil {
		return err
	}
	if embT.Rows() != a.Vocab || embT.Cols() != a.Hidden {
		return fmt.Errorf("webgpu: %s shape %v, want [%d %d]", model.TokenEmbd, embT.Shape, a.Vocab, a.Hidden)
	}
	headT := embT
	if !a.TiedEmbeddings {
		if headT, err = tensorHeader(m, model.Output); err != nil {
			return err
		}
	}
	// Placement: embedding, head and final norm always; then the allowed
	// layers in order while they fit the budget. The first that does not
	// fit ends the device's share (a prefix of the allowed layers).
	budget := b.opts.VRAMBudget
	used := deviceBytes(embT.Codec, embT.Rows(), embT.Cols()) + int64(4*a.Hidden)
	if !a.TiedEmbeddings {
		used += deviceBytes(headT.Codec, headT.Rows(), headT.Cols())
	}
	if budget > 0 && used > budget {
		return fmt.Errorf("webgpu: %w: embedding and head need %d bytes, budget %d", ErrUnsupported, used, budget)
	}
	if ctx := b.opts.ReserveContext; budget > 0 && ctx > 0 {
		need := SessionBytes(a, ctx, b.opts)
		if used+need.Total() > budget {
			return fmt.Errorf("webgpu: %w: a context of %d positions needs %s of device memory (KV %s, state %s, activations %s) beside the embedding and head's %s; the budget is %s: lower the context, use an f16 KV cache (--kv f16) or raise the budget",
				ErrUnsupported, ctx, MiB(need.Total()), MiB(need.KV), MiB(need.State), MiB(need.Activations), MiB(used), MiB(budget))
		}
		used += need.Total()
	}
	onDev := make([]bool, len(a.Layers))
	full := false
	for i := range a.Layers {
		if !allowed[i] || full {
			continue
		}
		lb := layerBytes(m, i)
		if budget > 0 && used+lb > budget {
			full = true
			continue
		}
		used += lb
		onDev[i] = true
	}
	if b.zero, err = b.dev.NewStorage("zero", 16); err != nil {
		return err
	}
	if b.emb, err = b.uploadNamed(ctx, m, model.TokenEmbd); err != nil {
		return err
	}
	b.embScale = a.Scales().Embed
	if a.TiedEmbeddings {
		b.head = b.emb
	} else if b.head, err = b.uploadNamed(ctx, m, model.Output); err != nil {
		return err
	}
	if b.head.rows != a.Vocab || b.head.cols != a.Hidden {
		return fmt.Errorf("webgpu: head shape [%d %d], want [%d %d]", b.head.rows, b.head.cols, a.Vocab, a.Hidden)
	}
	if b.finalNorm, err = b.uploadVec(m, model.OutputNorm, a.Hidden); err != nil {
		return err
	}
	b.tokenWeightBytes = b.head.bytes
	b.layers = make([]*dlayer, len(a.Layers))
	for i := range a.Layers {
		l := &a.Layers[i]
		if at := l.Attn; at != nil {
			qw, kvw := at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
			b.maxQKV = max(b.maxQKV, qw+2*kvw)
			b.maxAtt = max(b.maxAtt, qw)
			b.maxHeads = max(b.maxHeads, at.Heads)
			b.maxHD = max(b.maxHD, at.HeadDim)
		} else {
			b.maxAtt = max(b.maxAtt, mixerWidth(l, a.Hidden))
		}
		b.maxFFN = max(b.maxFFN, l.FFNHidden)
		if l.MoE != nil {
			b.maxFFN = max(b.maxFFN, l.MoE.SharedHidden)
		}
		if !onDev[i] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		dl, err := b.loadLayer(m, i)
		if err != nil {
			return err
		}
		b.layers[i] = dl
		for _, w := range append(dl.qkv, dl.mixerWeights()...) {
			b.tokenWeightBytes += w.bytes
		}
		for _, w := range dl.gu {
			b.tokenWeightBytes += w.bytes
		}
		b.tokenWeightBytes += dl.o.bytes
		if dl.down != nil {
			b.tokenWeightBytes += dl.down.bytes
		}
		if dl.moe != nil {
			b.tokenWeightBytes += dl.moe.decodeBytes()
		}
	}
	return nil
}

func (b *Backend) loadLayer(m *model.Model, i int) (*dlayer, error) {
	a := b.arch
	l := &a.Layers[i]
	at := l.Attn
	dl := &dlayer{spec: l, at: at, f: l.FFNHidden}
	if at != nil {
		dl.qw, dl.kvw = at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
	}
	name := func(s string) string { return model.LayerTensor(i, s) }
	var err error
	vec := func(dst **gpu.Buffer, on bool, s string, n int) {
		if err == nil && on {
			*dst, err = b.uploadVec(m, name(s), n)
		}
	}
	vec(&dl.attnNorm, l.PreMixerNorm, model.AttnNorm, a.Hidden)
	vec(&dl.postAttnNorm, l.PostMixerNorm, model.PostAttnNorm, a.Hidden)
	vec(&dl.ffnNorm, l.PreFFNNorm, model.FFNNorm, a.Hidden)
	vec(&dl.postFFNNorm, l.PostFFNNorm, model.PostFFNNorm, a.Hidden)
	if err != nil {
		return nil, err
	}
	get := func(s string, rows, cols int) (*tensor.Tensor, error) {
		t, err := b.tensor(m, name(s))
		if err != nil {
			return nil, err
		}
		if t.Rows() != rows || t.Cols() != cols {
			return nil, fmt.Errorf("webgpu: %s shape %v, want [%d %d]", t.Name, t.Shape, rows, cols)
		}
		return t, nil
	}
	if at == nil {
		if err := b.loadMixer(m, i, dl); err != nil {
			return nil, err
		}
		return b.loadFFN(m, i, dl)
	}
	var q *tensor.Tensor
	if at.OutputGate {
		qg, err := get(model.AttnQ, 2*dl.qw, a.Hidden)
		if err != nil {
			return nil, err
		}
		var gate *tensor.Tensor
		if q, gate, err = splitQGate(qg, at.Heads, at.HeadDim); err != nil {
			return nil, err
		}
		if dl.qGate, err = b.uploadWeight(name("attn_q_gate"), gate); err != nil {
			return nil, err
		}
	} else if q, err = get(model.AttnQ, dl.qw, a.Hidden); err != nil {
		return nil, err
	}
	k, err := get(model.AttnK, dl.kvw, a.Hidden)
	if err != nil {
		return nil, err
	}
	v, err := get(model.AttnV, dl.kvw, a.Hidden)
	if err != nil {
		return nil, err
	}
	if sameCodec(q, k, v) {
		w, err := b.uploadWeight(name("attn_qkv"), q, k, v)
		if err != nil {
			return nil, err
		}
		dl.qkv = []*dweight{w}
	} else {
		for _, t := range []*tensor.Tensor{q, k, v} {
			w, err := b.uploadWeight(t.Name, t)
			if err != nil {
				return nil, err
			}
			dl.qkv = append(dl.qkv, w)
		}
	}
	if at.Bias {
		var bias []float32
		for _, s := range []struct {
			n string
			w int
		}{{model.AttnQBias, dl.qw}, {model.AttnKBias, dl.kvw}, {model.AttnVBias, dl.kvw}} {
			t, err := b.tensor(m, name(s.n))
			if err != nil {
				return nil, err
			}
			vv, err := vectorF32(t, s.w)
			if err != nil {
				return nil, err
			}
			bias = append(bias, vv...)
		}
		if len(dl.qkv) == 1 {
			if dl.qkvBias, err = b.uploadF32(name("attn_qkv.bias"), bias); err != nil {
				return nil, err
			}
		} else {
			// Storage bindings at an offset must be 256-byte aligned, so
			// separate projections get separate bias buffers.
			for _, part := range [][]float32{bias[:dl.qw], bias[dl.qw : dl.qw+dl.kvw], bias[dl.qw+dl.kvw:]} {
				buf, err := b.uploadF32(name("attn bias"), part)
				if err != nil {
					return nil, err
				}
				dl.biasParts = append(dl.biasParts, buf)
			}
		}
	}
	o, err := get(model.AttnOut, a.Hidden, dl.qw)
	if err != nil {
		return nil, err
	}
	if dl.o, err = b.uploadWeight(o.Name, o); err != nil {
		return nil, err
	}
	if at.OutBias {
		if dl.oBias, err = b.uploadVec(m, name(model.AttnOutBias), a.Hidden); err != nil {
			return nil, err
		}
	}
	if at.Sinks {
		t, err := b.tensor(m, name(model.AttnSinks))
		if err != nil {
			return nil, err
		}
		if dl.sinks, err = vectorF32(t, at.Heads); err != nil {
			return nil, err
		}
	}
	switch at.QKNorm {
	case model.QKNormNone:
	case model.QKNormPerHead, model.QKNormFull:
		qn, kn := at.HeadDim, at.HeadDim
		if at.QKNorm == model.QKNormFull {
			qn, kn = dl.qw, dl.kvw
		}
		qt, err := b.tensor(m, name(model.AttnQNorm))
		if err != nil {
			return nil, err
		}
		kt, err := b.tensor(m, name(model.AttnKNorm))
		if err != nil {
			return nil, err
		}
		qv, err := vectorF32(qt, qn)
		if err != nil {
			return nil, err
		}
		kv, err := vectorF32(kt, kn)
		if err != nil {
			return nil, err
		}
		if at.QKNorm == model.QKNormFull {
			if dl.qNorm, err = b.uploadF32(qt.Name, qv); err != nil {
				return nil, err
			}
			if dl.kNorm, err = b.uploadF32(kt.Name, kv); err != nil {
				return nil, err
			}
			break
		}
		dl.knOff = qn
		if dl.qkn, err = b.uploadF32(name("attn_qk_norm"), append(qv, kv...)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("webgpu: %w: q/k norm %q", ErrUnsupported, at.QKNorm)
	}
	return b.loadFFN(m, i, dl)
}

// loadFFN loads layer i's feed-forward block, then finishes the layer.
func (b *Backend) loadFFN(m *model.Model, i int, dl *dlayer) (*dlayer, error) {
	a := b.arch
	l := dl.spec
	name := func(s string) string { return model.LayerTensor(i, s) }
	get := func(s string, rows, cols int) (*tensor.Tensor, error) {
		t, err := b.tensor(m, name(s))
		if err != nil {
			return nil, err
		}
		if t.Rows() != rows || t.Cols() != cols {
			return nil, fmt.Errorf("webgpu: %s shape %v, want [%d %d]", t.Name, t.Shape, rows, cols)
		}
		return t, nil
	}
	var err error
	if l.FFN == model.FFNMoE {
		if dl.moe, err = b.loadMoE(m, i, l.MoE); err != nil {
			return nil, err
		}
		return b.finishLayer(dl, i)
	}
	gate, err := get(model.FFNGate, dl.f, a.Hidden)
	if err != nil {
		return nil, err
	}
	up, err := get(model.FFNUp, dl.f, a.Hidden)
	if err != nil {
		return nil, err
	}
	if sameCodec(gate, up) && !gate.Codec.HasSide() {
		// Rows interleaved, so a matvec workgroup holds each gate row next
		// to its up row and can apply the activation itself (see
		// matmul.wgsl's mode 2): one dispatch less per layer at decode. (A
		// codec with a side field keeps two weights, each with its own
		// column field, which one interleaved tensor cannot carry.)
		gu, err := interleaveRows(name("ffn_gate_up"), gate, up)
		if err != nil {
			return nil, err
		}
		w, err := b.uploadWeight(gu.Name, gu)
		if err != nil {
			return nil, err
		}
		dl.gu = []*dweight{w}
		dl.guInterleaved = true
	} else {
		for _, t := range []*tensor.Tensor{gate, up} {
			w, err := b.uploadWeight(t.Name, t)
			if err != nil {
				return nil, err
			}
			dl.gu = append(dl.gu, w)
		}
	}
	down, err := get(model.FFNDown, a.Hidden, dl.f)
	if err != nil {
		return nil, err
	}
	if dl.down, err = b.uploadWeight(down.Name, down); err != nil {
		return nil, err
	}
	return b.finishLayer(dl, i)
}

// finishLayer derives the layer's rotary tables.
func (b *Backend) finishLayer(dl *dlayer, i int) (*dlayer, error) {
	var err error
	at := dl.at
	if at == nil {
		return dl, nil
	}
	if r := at.Rope; r.Dims > 0 {
		dl.rope, err = model.NewRopeTable(r, at.HeadDim)
		if errors.Is(err, model.ErrRopeScaling) || errors.Is(err, model.ErrRopeStyle) {
			return nil, fmt.Errorf("webgpu: layer %d: %w: %v", i, ErrUnsupported, err)
		}
		if err != nil {
			return nil, fmt.Errorf("webgpu: layer %d: %w", i, err)
		}
	}
	return dl, nil
}

// Matmul geometry (see Tuning): GemmTB tokens per workgroup for
// prefill; MVRows / GemmRows output rows per workgroup for the decode
// matvec / prefill GEMM.

func (b *Backend) embedPipe(c tensor.Codec) (*gpu.Pipeline, error) {
	src, err := shaders.Embed(c)
	if err != nil {
		return nil, err
	}
	return b.dev.Pipeline("embed/"+c.String(), src, kinds(shaders.KEmbed))
}

func (b *Backend) matmulPipe(c tensor.Codec, tb, r int) (*gpu.Pipeline, error) {
	return b.dev.PipelineOf(fmt.Sprintf("matmul/%s/tb%d/r%d", c, tb, r), func() (string, error) { return shaders.MatmulRows(c, tb, r) }, kinds(shaders.KMatmul))
}

// matmulNormPipe is the decode matvec that multiplies by RMSNorm(x) itself
// (shaders.MatmulRowsNorm).
func (b *Backend) matmulNormPipe(c tensor.Codec) (*gpu.Pipeline, error) {
	r := b.tune.MVRows
	return b.dev.PipelineOf(fmt.Sprintf("matmul-norm/%s/tb1/r%d", c, r), func() (string, error) { return shaders.MatmulRowsNorm(c, 1, r) }, kinds(shaders.KMatmulNorm))
}

// matvecPipe is the decode matvec (one token per workgroup row) for a
// rows x cols weight of codec c, with the fused RMSNorm when norm, and the
// rows one workgroup computes. It is the staged kernel (shaders.Matvec:
// x read once per workgroup into workgroup memory) when the row fits the
// device's workgroup memory, else the row-blocked one (MatmulRows,
// MatmulRowsNorm). The choice depends on the weight's shape only, so a
// weight's plain and fused-norm variants share one grid.
func (b *Backend) matvecPipe(c tensor.Codec, rows, cols int, norm bool) (*gpu.Pipeline, int, error) {
	sh, staged := b.matvecStaged(c, rows, cols)
	if !staged {
		if norm {
			p, err := b.matmulNormPipe(c)
			return p, b.tune.MVRows, err
		}
		p, err := b.matmulPipe(c, 1, b.tune.MVRows)
		return p, b.tune.MVRows, err
	}
	kernel := shaders.KMatmul
	if norm {
		kernel = shaders.KMatmulNorm
	}
	p, err := b.dev.PipelineOf(fmt.Sprintf("matvec/%s/r%ds%dg%d/%d/%v", c, sh.Rows, sh.Sets, sh.Groups, cols, norm),
		func() (string, error) { return shaders.Matvec(c, sh, cols, norm) }, kinds(kernel))
	return p, sh.RowsPerWorkgroup(), err
}

// tiledMinTokens is the shortest step whose attention runs tiled
// (attn_prefill.wgsl): with fewer queries per workgroup than this the
// per-query kernel, split over the span, keeps more of the GPU busy.
const tiledMinTokens = 32

// attnPrefillPipe is the tiled prefill attention for head dimension hd, or
// nil where it does not apply (the per-query kernel then serves).
func (b *Backend) attnPrefillPipe(hd int) *gpu.Pipeline {
	blk := b.tune.AttnBlock // tokens per workgroup
	p, err := b.dev.PipelineOf(fmt.Sprintf("attn_prefill/%d/%d%s", hd, blk, b.kvSuffix()), func() (string, error) { return shaders.AttnPrefillKV(hd, blk, b.opts.KVF16) }, kinds(shaders.Attention))
	if err != nil {
		return nil
	}
	return p
}

// matvecStaged is the staged matvec's shape for a rows x cols weight of
// codec c, and whether it is staged at all (else the row-blocked kernel
// serves, Tuning.MVRows rows per workgroup).
func (b *Backend) matvecStaged(c tensor.Codec, rows, cols int) (shaders.MatvecShape, bool) {
	sh := b.tune.matvecShape(rows)
	ok := b.tune.stagedCodec(c) && cols%shaders.ChunkOf(c) == 0 &&
		shaders.MatvecSharedBytes(sh, cols)+shaders.LUTBytes(c) <= int(b.dev.Limits().MaxComputeWorkgroupStorageSize)
	return sh, ok
}

// matvecPairsRows reports whether w's decode matvec gives each thread an
// even number of consecutive rows, as interleaved gate/up rows (mode 2)
// need.
func (b *Backend) matvecPairsRows(w *dweight) bool {
	if sh, ok := b.matvecStaged(w.codec, w.rows, w.cols); ok {
		return sh.Rows%2 == 0
	}
	return b.tune.MVRows%2 == 0
}

// kvPipe is qkv_prep or attention for the session's KV cache codec.
func (b *Backend) kvPipe(name string) (*gpu.Pipeline, error) {
	src, err := shaders.SourceKV(name, b.opts.KVF16)
	if err != nil {
		return nil, err
	}
	return b.dev.Pipeline(name+b.kvSuffix(), src, kinds(name))
}

func (b *Backend) kvSuffix() string {
	if b.opts.KVF16 {
		return "/kv_f16"
	}
	return ""
}

// kvElem is the bytes of one KV cache element.
func (b *Backend) kvElem() int {
	if b.opts.KVF16 {
		return 2
	}
	return 4
}

func (b *Backend) namedPipe(name string) (*gpu.Pipeline, error) {
	src, err := shaders.Source(name)
	if err != nil {
		return nil, err
	}
	return b.dev.Pipeline(name, src, kinds(name))
}

func (b *Backend) normPipe(inPlace bool) (*gpu.Pipeline, error) {
	if inPlace {
		return b.dev.Pipeline("rmsnorm/ip", shaders.RMSNorm(true), kinds(shaders.KRMSNormIP))
	}
	return b.dev.Pipeline("rmsnorm", shaders.RMSNorm(false), kinds(shaders.KRMSNorm))
}

// buildPipelines compiles every kernel the model needs up front, so a
// shader problem is an error from New, not from the first token.
func (b *Backend) buildPipelines() error {
	codecs := map[tensor.Codec]bool{b.emb.codec: true, b.head.codec: true}
	// use marks w's codec, or its stages' for a two-product weight.
	var use func(w *dweight)
	use = func(w *dweight) {
		switch {
		case w == nil:
		case w.stages[0] != nil:
			use(w.stages[0])
			use(w.stages[1])
		default:
			codecs[w.codec] = true
		}
	}
	for _, dl := range b.layers {
		if dl == nil {
			continue
		}
		for _, w := range append(append([]*dweight{dl.o, dl.down}, dl.qkv...), dl.gu...) {
			use(w)
		}
		for _, w := range dl.mixerWeights() {
			use(w)
		}
		if err := b.hybridPipes(dl); err != nil {
			return err
		}
		if dl.moe != nil {
			for _, w := range dl.moe.weights() {
				use(w)
			}
			for _, w := range []*dweight{dl.moe.gu, dl.moe.down} {
				if _, err := b.expertPipe(w.codec); err != nil {
					return err
				}
			}
			for _, name := range []string{shaders.MoERoute, shaders.MoECombine} {
				if _, err := b.hybridPipe(name); err != nil {
					return err
				}
			}
		}
	}
	if _, err := b.embedPipe(b.emb.codec); err != nil {
		return err
	}
	for c := range codecs {
		if _, err := b.matmulPipe(c, 1, b.tune.MVRows); err != nil {
			return err
		}
		if _, err := b.matmulPipe(c, b.tune.GemmTB, b.tune.GemmRows); err != nil {
			return err
		}
		if _, err := b.matmulNormPipe(c); err != nil {
			return err
		}
	}
	for _, ip := range []bool{false, true} {
		if _, err := b.normPipe(ip); err != nil {
			return err
		}
	}
	for _, name := range []string{shaders.QKVPrep, shaders.Attention, shaders.Combine, shaders.ActMul, shaders.Argmax, shaders.ArgmaxPart, shaders.Advance} {
		if _, err := b.namedPipe(name); err != nil {
			return err
		}
	}
	return nil
}

// Name is "webgpu:<adapter name>".
func (b *Backend) Name() string { return deviceName(b.dev.Info()) }

// Device is the device the backend runs on.
func (b *Backend) Device() *gpu.Device { return b.dev }

// DeviceLayers reports which layers run on the device.
func (b *Backend) DeviceLayers() []bool {
	out := make([]bool, len(b.layers))
	for i, l := range b.layers {
		out[i] = l != nil
	}
	return out
}

// Stats implements backend.StatsReporter. SubmitsPerToken counts queue
// submits over consumed positions; WeightBytesToken is the weight bytes one
// decode step reads on the device. FallbackOps stays zero: the scheduler
// counts the layers it runs off the device.
func (b *Backend) Stats() backend.Stats {
	b.stats.Lock()
	defer b.stats.Unlock()
	st := backend.Stats{
		UploadBytes:      b.stats.upload,
		ResidentBytes:    b.stats.resident,
		WeightBytesToken: b.tokenWeightBytes,
		Submits:          b.stats.submits,
		Tokens:           b.stats.tokens,
		ReadbackBytes:    b.dev.ReadbackBytes(),
	}
	if b.stats.tokens > 0 {
		st.SubmitsPerToken = float64(b.stats.submits) / float64(b.stats.tokens)
	}
	return st
}

func (b *Backend) count(submits, tokens, _ int64) {
	b.stats.Lock()
	b.stats.submits += submits
	b.stats.tokens += tokens
	b.stats.Unlock()
}

func (b *Backend) addResident(n int64) {
	b.stats.Lock()
	b.stats.resident += n
	b.stats.Unlock()
}

// Close releases the weights and, when the backend opened it, the device.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	rel := func(w *dweight) {
		w.release()
	}
	if b.head != b.emb {
		rel(b.head)
	}
	rel(b.emb)
	b.finalNorm.Release()
	b.zero.Release()
	for _, dl := range b.layers {
		if dl == nil {
			continue
		}
		for _, w := range append(append([]*dweight{dl.o, dl.down}, dl.qkv...), dl.gu...) {
			rel(w)
		}
		if dl.moe != nil {
			dl.moe.release()
		}
		dl.releaseMixer()
		for _, x := range append([]*gpu.Buffer{dl.attnNorm, dl.postAttnNorm, dl.ffnNorm, dl.postFFNNorm, dl.qkvBias, dl.oBias, dl.qkn, dl.qNorm, dl.kNorm}, dl.biasParts...) {
			x.Release()
		}
	}
	if b.ownsDev && b.dev != nil {
		b.dev.Close()
	}
	return nil
}

// DeviceID identifies the adapter for caches keyed by device (the probe's
// verdicts): name, backend and driver.
func (b *Backend) DeviceID() string {
	i := b.dev.Info()
	return i.Name + "|" + i.Backend + "|" + i.Driver
}

// interleaveRows returns the rows of a and b alternated (a0, b0, a1, b1,
// ...): both have the same codec and shape, and a row is an independent
// byte range in every codec.
func interleaveRows(name string, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	n, err := tensor.ByteLen(a.Codec, a.Shape)
	if err != nil {
		return nil, fmt.Errorf("webgpu: %s: %w", a.Name, err)
	}
	rows := a.Rows()
	if b.Codec != a.Codec || b.Rows() != rows || b.Cols() != a.Cols() || int64(len(a.Data)) != n || int64(len(b.Data)) != n || rows == 0 {
		return nil, fmt.Errorf("webgpu: %s and %s cannot be interleaved (%s %v, %s %v)", a.Name, b.Name, a.Codec, a.Shape, b.Codec, b.Shape)
	}
	rb := int(n) / rows
	data := make([]byte, 0, 2*n)
	for r := 0; r < rows; r++ {
		data = append(data, a.Data[r*rb:(r+1)*rb]...)
		data = append(data, b.Data[r*rb:(r+1)*rb]...)
	}
	return &tensor.Tensor{Name: name, Codec: a.Codec, Shape: []int{2 * rows, a.Cols()}, Data: data}, nil
}

// uploadStaged uploads a weight run as two products (blr): its stages,
// each in a codec the kernels read, under one dweight; the graph runs them
// in turn (graph.matmul). b.blrRank grows to its inner dimension, the
// session's scratch between the two.
func (b *Backend) uploadStaged(label string, d *shaders.DeviceCodec, ts []*tensor.Tensor) (*dweight, error) {
	if len(ts) != 1 {
		return nil, fmt.Errorf("webgpu: %s: %s weights run as two products and cannot be fused", label, ts[0].Codec)
	}
	sa, sb, err := d.Stages(ts[0])
	if err != nil {
		return nil, fmt.Errorf("webgpu: %w", err)
	}
	wa, err := b.uploadWeight(sa.Name, sa)
	if err != nil {
		return nil, err
	}
	wb, err := b.uploadWeight(sb.Name, sb)
	if err != nil {
		wa.release()
		return nil, err
	}
	b.blrRank = max(b.blrRank, wa.rows)
	return &dweight{name: label, codec: ts[0].Codec, rows: wb.rows, cols: wa.cols, bytes: wa.bytes + wb.bytes, stages: [2]*dweight{wa, wb}}, nil
}

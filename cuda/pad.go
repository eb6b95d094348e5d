package cuda

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// minHeadDim is the smallest head the attention kernels take.
const minHeadDim = 32

// headPad is how one layer's heads sit on the device: hd dims of the
// model padded with zeros to dev (equal when the layer is not padded).
type headPad struct{ hd, dev int }

func (p headPad) padded() bool { return p.dev != p.hd }

// padHeads returns m with the heads of every attention layer narrower than
// the kernels take (tiny models: head dims 8 and 16) padded with zero dims
// to minHeadDim, and each layer's padding. Zero dims change no dot product
// (q·k sums the real dims; the attention scale is the model's own), the
// padded value dims come out zero and meet zero columns of the output
// projection; RoPE rotates the first Rope.Dims dims as before. A q/k
// norm averages over the real dims: its weight is pre-scaled by
// sqrt(hd/dev) and its epsilon by hd/dev (Session.qkNorm), which gives the
// same x/rms·w. Only plain codecs (f32, f16, bf16) are padded; m is
// returned unchanged when no layer needs it.
func padHeads(m *model.Model) (*model.Model, []headPad, error) {
	a := &m.Arch
	pads := make([]headPad, len(a.Layers))
	any := false
	for i, l := range a.Layers {
		pads[i] = headPad{0, 0}
		if l.Attn == nil {
			continue
		}
		hd := l.Attn.HeadDim
		pads[i] = headPad{hd, hd}
		if hd < minHeadDim && hd >= 4 && hd%4 == 0 {
			pads[i].dev = minHeadDim
			any = true
		}
	}
	if !any {
		return m, pads, nil
	}
	pa := *a
	pa.Layers = append([]model.Layer(nil), a.Layers...)
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		if t, ok := m.Weights.Tensor(n); ok {
			w[n] = t
		}
	}
	for i := range pa.Layers {
		p := pads[i]
		if !p.padded() {
			continue
		}
		at := *pa.Layers[i].Attn
		at.HeadDim = p.dev
		pa.Layers[i].Attn = &at
		orig := a.Layers[i].Attn
		pre := fmt.Sprintf("blk.%d.", i)
		for _, x := range []struct {
			name  string
			heads int
			cols  bool // pad the columns (the output projection), else the rows
		}{
			{model.AttnQ, orig.Heads, false}, {model.AttnK, orig.KVHeads, false}, {model.AttnV, orig.KVHeads, false},
			{model.AttnQBias, orig.Heads, true}, {model.AttnKBias, orig.KVHeads, true}, {model.AttnVBias, orig.KVHeads, true},
			{model.AttnOut, orig.Heads, true},
		} {
			t, ok := w[pre+x.name]
			if !ok {
				continue // biases are optional; a missing projection is reported at load
			}
			pt, err := padTensor(t, x.heads, p, x.cols)
			if err != nil {
				return nil, nil, fmt.Errorf("cuda: %w: layer %d has heads of %d dims (the kernels take %d or more): %v", ErrUnsupported, i, p.hd, minHeadDim, err)
			}
			w[pre+x.name] = pt
		}
		if orig.QKNorm != model.QKNormNone {
			for _, x := range []struct {
				name  string
				heads int
			}{{model.AttnQNorm, orig.Heads}, {model.AttnKNorm, orig.KVHeads}} {
				t, ok := w[pre+x.name]
				if !ok {
					continue
				}
				pt, err := padNorm(t, x.heads, p, orig.QKNorm == model.QKNormFull, a.Norm == model.NormRMSPlusOne)
				if err != nil {
					return nil, nil, fmt.Errorf("cuda: %w: layer %d q/k norm: %v", ErrUnsupported, i, err)
				}
				w[pre+x.name] = pt
			}
		}
	}
	pm := *m
	pm.Arch = pa
	pm.Weights = w
	return &pm, pads, nil
}

// padTensor pads a plain-codec tensor per head: its rows ([heads*hd, n] →
// [heads*dev, n]) or, with cols, its columns ([n, heads*hd] → [n,
// heads*dev]; a 1-D bias is one row of columns).
func padTensor(t *tensor.Tensor, heads int, p headPad, cols bool) (*tensor.Tensor, error) {
	switch t.Codec {
	case tensor.F32, tensor.F16, tensor.BF16:
	default:
		return nil, fmt.Errorf("%s is %s (only f32, f16 and bf16 heads are padded)", t.Name, t.Codec)
	}
	es := t.Codec.BlockBytes()
	rows, n := t.Rows(), t.Cols()
	out := &tensor.Tensor{Name: t.Name, Codec: t.Codec}
	if cols {
		if n != heads*p.hd {
			return nil, fmt.Errorf("%s: %d columns for %d heads of %d", t.Name, n, heads, p.hd)
		}
		nn := heads * p.dev
		out.Data = make([]byte, rows*nn*es)
		for r := range rows {
			for h := range heads {
				copy(out.Data[(r*nn+h*p.dev)*es:], t.Data[(r*n+h*p.hd)*es:(r*n+(h+1)*p.hd)*es])
			}
		}
		out.Shape = append(append([]int(nil), t.Shape[:len(t.Shape)-1]...), nn)
		return out, nil
	}
	if rows != heads*p.hd {
		return nil, fmt.Errorf("%s: %d rows for %d heads of %d", t.Name, rows, heads, p.hd)
	}
	out.Data = make([]byte, heads*p.dev*n*es)
	for h := range heads {
		copy(out.Data[h*p.dev*n*es:], t.Data[h*p.hd*n*es:(h+1)*p.hd*n*es])
	}
	out.Shape = []int{heads * p.dev, n}
	return out, nil
}

// padNorm pads a q/k norm weight ([hd] per head, or [heads*hd] full) to the
// device's head and folds in what averaging over the padded width needs:
// w' = w·sqrt(hd/dev) (1+w with plusOne), zeros in the padding.
func padNorm(t *tensor.Tensor, heads int, p headPad, full, plusOne bool) (*tensor.Tensor, error) {
	n := p.hd
	if full {
		n = heads * p.hd
	} else {
		heads = 1
	}
	if t.Elements() != n {
		return nil, fmt.Errorf("%s: %d values, want %d", t.Name, t.Elements(), n)
	}
	v := make([]float32, n)
	if err := tensor.Dequantize(v, t.Codec, t.Data); err != nil {
		return nil, err
	}
	s := float32(math.Sqrt(float64(p.hd) / float64(p.dev)))
	out := make([]float32, heads*p.dev)
	for h := range heads {
		for d := range p.hd {
			x := v[h*p.hd+d]
			if plusOne {
				x++
			}
			out[h*p.dev+d] = x * s
		}
	}
	data := make([]byte, 4*len(out))
	for i, x := range out {
		b := math.Float32bits(x)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
	}
	return &tensor.Tensor{Name: t.Name, Codec: tensor.F32, Shape: []int{len(out)}, Data: data}, nil
}

package writer

import (
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// QuantizeExperts returns m with its routed-expert banks
// (ffn_{gate,up,down}_exps.weight) re-encoded in codec c by round to
// nearest (tensor.Quantize), every other tensor shared with m: the
// MXFP4_MOE recipe llama.cpp's gpt-oss files ship, ready for SaveGGUF. The
// result's Close is a no-op; m still owns the mapping.
func QuantizeExperts(m *model.Model, c tensor.Codec) (*model.Model, error) {
	w := model.MapWeights{}
	for _, name := range m.Weights.Names() {
		t, ok := m.Weights.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("quantize experts: tensor %q listed but not readable", name)
		}
		if !strings.HasSuffix(name, "_exps.weight") || t.Codec == c {
			w[name] = t
			continue
		}
		in := t.Shape[len(t.Shape)-1]
		if c.BlockLen() > 0 && in%c.BlockLen() != 0 {
			return nil, fmt.Errorf("quantize experts: tensor %q: rows of %d values are not whole %s blocks of %d", name, in, c, c.BlockLen())
		}
		f := make([]float32, t.Elements())
		if err := tensor.Dequantize(f, t.Codec, t.Data); err != nil {
			return nil, fmt.Errorf("quantize experts: tensor %q: %w", name, err)
		}
		n, err := tensor.ByteLen(c, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("quantize experts: tensor %q: %w", name, err)
		}
		data := make([]byte, n)
		if err := tensor.Quantize(data, c, f); err != nil {
			return nil, fmt.Errorf("quantize experts: tensor %q: %w", name, err)
		}
		w[name] = &tensor.Tensor{Name: name, Codec: c, Shape: append([]int(nil), t.Shape...), Data: data}
	}
	q := *m
	q.Weights = w
	q.Close = func() error { return nil }
	return &q, nil
}

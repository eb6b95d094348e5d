package writer

import (
	"reflect"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

func TestCMFConvertPlain(t *testing.T) {
	vals := []float32{1, -2, 0.5, 3, 0, 7}
	data := make([]byte, 24)
	if err := tensor.Quantize(data, tensor.F32, vals); err != nil {
		t.Fatal(err)
	}
	src := &tensor.Tensor{Name: "x", Codec: tensor.F32, Shape: []int{6}, Data: data}
	if shouldConvert(src, tensor.Q8_0) {
		t.Error("1-D tensor selected for q8_0")
	}
	if !shouldConvert(src, tensor.F16) {
		t.Error("1-D tensor not selected for f16")
	}
	out, err := convert(src, tensor.F16)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	tensor.Dequantize(got, tensor.F16, out.Data)
	if !reflect.DeepEqual(got, vals) || out.Codec != tensor.F16 {
		t.Errorf("f16: %v", got)
	}
	order := tensorOrder([]string{"output.weight", "blk.10.attn_q.weight", "blk.2.ffn_up.weight", model.TokenEmbd, "blk.2.attn_k.weight", "output_norm.weight"})
	want := []string{model.TokenEmbd, "blk.2.attn_k.weight", "blk.2.ffn_up.weight", "blk.10.attn_q.weight", "output.weight", "output_norm.weight"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("order %v", order)
	}
}

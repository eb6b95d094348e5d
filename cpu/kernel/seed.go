package kernel

import "github.com/cortiq/cortiq/tensor"

// The seed's codecs (tensor/seed.go) run the exact path of lowbit.go:
// rows decoded with tensor.Dequantize, one float32 dot product each.
var seedCodecs = []tensor.Codec{tensor.Q8_ROW, tensor.Q4_TILED, tensor.Q4TP, tensor.Q2TP, tensor.Q1, tensor.Q1G, tensor.Q1T}

func init() {
	for _, c := range seedCodecs {
		k, d := decodedRows(c), dequantizeRow(c)
		genericKernels[c], matvecKernels[c] = k, k
		genericDecoders[c], decoders[c] = d, d
	}
}

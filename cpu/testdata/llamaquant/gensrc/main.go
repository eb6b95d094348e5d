// Command gensrc writes the float32 source GGUF that
// scripts/make-llamaquant-files.sh hands to llama-quantize: a two-layer
// llama whose matrices are all multiples of 256 wide (so the K- and
// IQ-quants apply without fallback), untied, small enough that every
// quantized file stays well under a megabyte. It lives under testdata so
// that `go build ./...` skips it; run it with
// `go run ./cpu/testdata/llamaquant/gensrc OUT.gguf`.
package main

import (
	"fmt"
	"os"

	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// Shape is the source model's shape (synth's tokenizer: specials, bytes,
// letters, filler words; llama-imatrix can tokenize plain text with it).
var Shape = synth.Shape{Name: "lq256", Arch: "llama", Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2,
	FFN: 256, Vocab: 320, RopeTheta: 10000, Context: 256}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gensrc OUT.gguf")
		os.Exit(2)
	}
	if err := synth.Write(os.Args[1], Shape, tensor.F32); err != nil {
		fmt.Fprintln(os.Stderr, "gensrc:", err)
		os.Exit(1)
	}
}

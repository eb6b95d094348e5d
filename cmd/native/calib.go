package main

import (
	"fmt"
	"os"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/quant"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/tokenizer"
)

// gptqCodecs names the codecs `import --calib` can write.
func gptqCodecs() []string {
	var s []string
	for c := tensor.Codec(0); c < tensor.NumCodecs; c++ {
		if tensor.CanSetElem(c) {
			s = append(s, c.String())
		}
	}
	return s
}

// gptqEncoder tokenizes the calibration text at path with m's tokenizer,
// accumulates the linear layers' input Gram matrices on the CPU and returns
// the GPTQ re-encoder of import --calib.
func gptqEncoder(m *model.Model, path string, c tensor.Codec, window int, actOrder bool) (func(*tensor.Tensor) (*tensor.Tensor, bool, error), error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--calib: %w", err)
	}
	if m.Tokenizer == nil {
		return nil, fmt.Errorf("--calib %s: the model has no tokenizer", path)
	}
	tok, err := tokenizer.Load(m.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("--calib %s: %w", path, err)
	}
	ids := tok.Encode(string(text), true)
	if len(ids) < 2 {
		return nil, fmt.Errorf("--calib %s: %d tokens of text; GPTQ needs calibration text", path, len(ids))
	}
	if window <= 0 {
		return nil, fmt.Errorf("--calib-window %d: want a positive token count", window)
	}
	if m.Arch.Context > 0 {
		window = min(window, m.Arch.Context)
	}
	grams, err := quant.Calibrate(m, ids, window)
	if err != nil {
		return nil, fmt.Errorf("--calib %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "calibrated on %d tokens of %s (%d weights)\n", len(ids), path, len(grams))
	return quant.Quantizer(grams, c, quant.Options{ActOrder: actOrder}), nil
}

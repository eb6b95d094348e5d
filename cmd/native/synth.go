package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cortiq/cortiq/synth"
)

func init() {
	register("synth", "write a random-weight model of a real shape as GGUF (llama.cpp loads it)", cmdSynth)
}

func cmdSynth(args []string) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	shape := fs.String("shape", "", "shape: "+strings.Join(synth.ShapeNames(), ", "))
	quant := fs.String("quant", "q4_0", "weights: "+strings.Join(synth.MixNames, ", ")+" (q4_K_M, q5_K_M, q3_K_M, q2_K_mix, iq3_M, iq2_M, iq1_M_mix, mxfp4_moe: mixes like llama-quantize's recipes)")
	out := fs.String("o", "", "output .gguf file, or a directory (the file is named SHAPE-QUANT.gguf)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := synth.ParseShape(*shape)
	if err != nil {
		return err
	}
	q, err := synth.ParseMix(*quant)
	if err != nil {
		return err
	}
	path := *out
	if path == "" {
		return fmt.Errorf("-o OUT.gguf or -o DIR is required")
	}
	if st, err := os.Stat(path); (err == nil && st.IsDir()) || strings.HasSuffix(path, "/") {
		os.MkdirAll(path, 0o755)
		path = filepath.Join(path, fmt.Sprintf("%s-%s.gguf", s.Name, q.Name))
	}
	t0 := time.Now()
	if err := synth.WriteMix(path, s, q); err != nil {
		return err
	}
	st, _ := os.Stat(path)
	fmt.Fprintf(os.Stderr, "wrote %s (%.1f MiB) in %.1fs\n", path, float64(st.Size())/(1<<20), time.Since(t0).Seconds())
	return nil
}

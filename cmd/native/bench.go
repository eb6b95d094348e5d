package main

import (
	"encoding/json"
	"fmt"
	"github.com/cortiq/cortiq/gpu"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/sample"
)

func init() {
	register("bench", "bench [-m MODEL] [--prompt 128] [--gen 128] [--json] [flags]", "measure prefill and decode speed", cmdBench)
}

// benchResult is one bench run; its fields are what BENCHMARKS.md records.
type benchResult struct {
	Model           string  `json:"model"`
	Backend         string  `json:"backend"`
	PromptTokens    int     `json:"prompt_tokens"`
	GenTokens       int     `json:"gen_tokens"`
	PrefillTokS     float64 `json:"prefill_tok_s"`
	DecodeTokS      float64 `json:"decode_tok_s"`
	SubmitsPerToken float64 `json:"submits_per_token,omitempty"`
	WeightBytesTok  int64   `json:"weight_bytes_per_token,omitempty"`
	WeightGBs       float64 `json:"weight_gb_s,omitempty"` // decode_tok_s × weight bytes per token
	Threads         int     `json:"threads"`
	Reps            int     `json:"reps"`
	GreedyBatch     int     `json:"greedy_batch,omitempty"`
	KernelLevel     string  `json:"kernel_level,omitempty"` // CPU kernels' instruction set (cpu backend)
	KernelMode      string  `json:"kernel_mode,omitempty"`  // exact or int8 (cpu backend)
	ReadGBs         float64 `json:"read_gb_s,omitempty"`    // --bandwidth: memory read bandwidth, same threads
	OfBandwidth     float64 `json:"of_bandwidth,omitempty"` // weight_gb_s / read_gb_s
}

// cpuTokenWeightBytes is what a CPU decode step reads of a dense model's
// weights: every matrix once (the embedding only when it is also the
// output); 0 for a mixture of experts, which reads a varying subset.
func cpuTokenWeightBytes(m *model.Model) int64 {
	var n int64
	for _, name := range m.Weights.Names() {
		t, ok := m.Weights.Tensor(name)
		if !ok || len(t.Shape) < 2 {
			continue
		}
		if len(t.Shape) > 2 {
			return 0
		}
		if name == model.TokenEmbd && !m.Arch.TiedEmbeddings {
			continue
		}
		n += int64(len(t.Data))
	}
	return n
}

// readBandwidth measures how fast the kernels' workers read memory
// (kernel.ReadBandwidth: mib MiB, far beyond the caches, laid out as the
// packed weights are; the best of reps passes), in GB/s.
func readBandwidth(mib, reps int) float64 { return kernel.ReadBandwidth(mib, reps) }

func cmdBench(args []string) error {
	fs := newFlags("bench")
	var mf modelFlags
	mf.register(fs)
	promptN := fs.Int("prompt", 128, "prompt tokens")
	genN := fs.Int("gen", 128, "generated tokens")
	reps := fs.Int("reps", 3, "repetitions (the best is reported)")
	jsonOut := fs.Bool("json", false, "print JSON")
	greedyBatch := fs.Int("greedy-batch", 1, "greedy tokens per device submit")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the runs to this file")
	bandwidth := fs.Bool("bandwidth", false, "also measure memory read bandwidth (all threads, 1 GiB); alone without -m")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var readGBs float64
	if *bandwidth {
		readGBs = readBandwidth(1024, 5)
		if mf.model == "" {
			if *jsonOut {
				return json.NewEncoder(os.Stdout).Encode(benchResult{Threads: runtime.GOMAXPROCS(0), ReadGBs: readGBs, KernelLevel: kernel.CurrentLevel().String()})
			}
			fmt.Printf("read bandwidth: %.2f GB/s (%d threads, %s kernels)\n", readGBs, runtime.GOMAXPROCS(0), kernel.CurrentLevel())
			return nil
		}
	}
	if mf.ctx == 0 {
		mf.ctx = *promptN + *genN + 1
	}
	ctx, cancel := interruptible()
	defer cancel()
	e, err := mf.load(ctx)
	if err != nil {
		return err
	}
	defer e.Close()
	// A deterministic prompt of ordinary token ids: the speed of a forward
	// pass does not depend on which ids they are.
	vocab := e.Model.Arch.Vocab
	prompt := make([]int, *promptN)
	x := uint32(12345)
	for i := range prompt {
		x = x*1664525 + 1013904223
		prompt[i] = 3 + int(x>>8)%(vocab-3)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	best := benchResult{Model: mf.model, PromptTokens: *promptN, GenTokens: *genN, Threads: runtime.GOMAXPROCS(0), Reps: *reps, GreedyBatch: *greedyBatch}
	for r := 0; r < *reps; r++ {
		res, err := e.Generate(ctx, engine.Request{IDs: prompt, MaxTokens: *genN, Sampling: sample.Params{}, IgnoreEOS: true, GreedyBatch: *greedyBatch}, nil)
		if err != nil {
			return err
		}
		best.Backend = res.Backend
		best.PrefillTokS = max(best.PrefillTokS, res.PrefillTokS)
		best.DecodeTokS = max(best.DecodeTokS, res.DecodeTokS)
		best.SubmitsPerToken = res.SubmitsPerToken
		best.WeightBytesTok = res.WeightBytesToken
		if !*jsonOut {
			fmt.Fprintf(os.Stderr, "rep %d: prefill %.1f tok/s, decode %.1f tok/s\n", r+1, res.PrefillTokS, res.DecodeTokS)
		}
	}
	if best.WeightBytesTok == 0 && best.Backend == "cpu" {
		best.WeightBytesTok = cpuTokenWeightBytes(e.Model)
	}
	best.WeightGBs = best.DecodeTokS * float64(best.WeightBytesTok) / 1e9
	if readGBs > 0 {
		best.ReadGBs = readGBs
		best.OfBandwidth = best.WeightGBs / readGBs
	}
	if best.Backend == "cpu" {
		best.KernelLevel, best.KernelMode = kernel.CurrentLevel().String(), kernel.CurrentMode().String()
	}
	// CORTIQ_GPU_PROFILE=1: GPU time per kernel class over all reps.
	if r := gpu.ProfileReport(); r != "" {
		fmt.Fprint(os.Stderr, r)
	}
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(best)
	}
	fmt.Printf("%s on %s (%d threads): prompt %d → prefill %.1f tok/s; gen %d → decode %.1f tok/s\n",
		best.Model, best.Backend, best.Threads, best.PromptTokens, best.PrefillTokS, best.GenTokens, best.DecodeTokS)
	if best.ReadGBs > 0 {
		fmt.Printf("read bandwidth %.2f GB/s; decode streams weights at %.2f GB/s (%.0f%%)\n", best.ReadGBs, best.WeightGBs, 100*best.OfBandwidth)
	}
	if best.KernelLevel != "" {
		fmt.Printf("cpu kernels: %s, %s\n", best.KernelLevel, best.KernelMode)
	}
	return nil
}

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/storage"
	"github.com/cortiq/cortiq/storage/download"
	"github.com/cortiq/cortiq/storage/progress"
	"github.com/cortiq/cortiq/webgpu"
)

// The CLI reads the environment here (and for flag defaults); the library
// packages take what it finds as options.
//
//	CORTIQ_CACHE        the cache: downloads (models/), HF conversions
//	                    (converted/), the speed probe's verdicts (probe.json);
//	                    default <user cache dir>/cortiq
//	CORTIQ_MODEL_PATH   directories searched for a model by name after the
//	                    cache, separated like PATH
//	CORTIQ_PROBE_CACHE  the verdict file instead of $CORTIQ_CACHE/probe.json
//	                    (0 or off: remember nothing)
//	CORTIQ_GPU          0 or 1: what --backend auto means (cpu or webgpu)
//	CORTIQ_PROBE        0: --backend auto keeps the first device that opens
//	                    (cuda, then webgpu) without racing them and the CPU
//	HF_ENDPOINT         the hub's base URL (default https://huggingface.co)
//	HF_TOKEN            the hub access token for gated or private repos
//	TERM                "dumb": progress as plain lines, even on a terminal
//
// and the WebGPU backend's tuning knobs (webgpu.Tuning, for timing the
// kernels on a new GPU; a value that does not parse or is out of range is
// ignored, the default kept):
//
//	CORTIQ_MATVEC           rows | all: the decode matvec (Tuning.Matvec)
//	CORTIQ_MATVEC_SHAPE     r,s,g with r even (Tuning.MatvecShape)
//	CORTIQ_MV_ROWS          1..16 (Tuning.MVRows)
//	CORTIQ_GEMM_ROWS        1..16 (Tuning.GemmRows)
//	CORTIQ_GEMM_TB          1..16 (Tuning.GemmTB)
//	CORTIQ_GEMM_LARGE_ROWS  1.. (Tuning.GemmLargeRows)
//	CORTIQ_ATTN_BLOCK       16..256 (Tuning.AttnBlock)
//	CORTIQ_ATTN_PREP        fused: the decode's qkv prep inside the attention kernel (Tuning.AttnPrep)
//	CORTIQ_ATTN_COMBINE     separate: split-K attention's combine as its own dispatch at decode (Tuning.AttnCombine)
//	CORTIQ_SMALL_STEPS      off: steps of 2..16 tokens on the prefill kernels (Tuning.SmallSteps)
//	CORTIQ_SMALL_ROWS       2..16, even (Tuning.SmallRows)
//	CORTIQ_TRACE_STEPS      1: print each prefill step's host time (Tuning.TraceSteps)

// cacheDir is cortiq's cache directory, "" when there is none.
func cacheDir() string {
	d, err := storage.CacheDir(os.Getenv(storage.CacheEnv))
	if err != nil {
		return ""
	}
	return d
}

// modelPath lists the CORTIQ_MODEL_PATH directories.
func modelPath() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("CORTIQ_MODEL_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// newResolver is the resolver the environment describes, downloading from
// the hub.
func newResolver() *resolve.Resolver {
	return &resolve.Resolver{CacheDir: cacheDir(), Path: modelPath(), Download: hubDownloader()}
}

// probeCachePath is where --backend auto's verdicts are kept ("" = nowhere).
func probeCachePath() string {
	if p, ok := os.LookupEnv("CORTIQ_PROBE_CACHE"); ok {
		if p == "0" || p == "off" {
			return ""
		}
		return p
	}
	if d := cacheDir(); d != "" {
		return filepath.Join(d, "probe.json")
	}
	return ""
}

// hub is the Hugging Face endpoint and token the environment names.
func hub() download.Hub {
	return download.Hub{Endpoint: os.Getenv(download.HFEndpointEnv), Token: os.Getenv(download.HFTokenEnv)}
}

// isTerminal reports whether progress on w may redraw in place: w is a
// terminal and TERM is not "dumb".
func isTerminal(w io.Writer) bool {
	return os.Getenv("TERM") != "dumb" && progress.IsTerminal(w)
}

// newBar is a progress bar on w for the terminal isTerminal describes.
func newBar(w io.Writer, label string) *progress.Bar {
	return progress.NewMode(w, label, isTerminal(w))
}

// gpuTuning is the WebGPU backend's tuning the environment sets, with the
// same acceptance as when the backend read it itself: values that do not
// parse or fall outside the range keep the default.
func gpuTuning() webgpu.Tuning {
	t := webgpu.Tuning{GPU: gpuOptions()}
	switch v := os.Getenv("CORTIQ_MATVEC"); v {
	case "rows", "all":
		t.Matvec = v
	}
	var r, s, g int
	if n, _ := fmt.Sscanf(os.Getenv("CORTIQ_MATVEC_SHAPE"), "%d,%d,%d", &r, &s, &g); n == 3 && r > 0 && r%2 == 0 && s >= 1 && g >= 1 {
		t.MatvecShape = shaders.MatvecShape{Rows: r, Sets: s, Groups: g}
	}
	t.MVRows = envInt("CORTIQ_MV_ROWS", 1, 16)
	t.GemmRows = envInt("CORTIQ_GEMM_ROWS", 1, 16)
	t.GemmTB = envInt("CORTIQ_GEMM_TB", 1, 16)
	t.GemmLargeRows = envInt("CORTIQ_GEMM_LARGE_ROWS", 1, 1<<30)
	t.AttnBlock = envInt("CORTIQ_ATTN_BLOCK", 16, 256)
	if os.Getenv("CORTIQ_ATTN_PREP") == "fused" {
		t.AttnPrep = "fused"
	}
	if os.Getenv("CORTIQ_ATTN_COMBINE") == "separate" {
		t.AttnCombine = "separate"
	}
	if os.Getenv("CORTIQ_SMALL_STEPS") == "off" {
		t.SmallSteps = "off"
	}
	if r := envInt("CORTIQ_SMALL_ROWS", 2, 16); r%2 == 0 {
		t.SmallRows = r
	}
	t.TraceSteps = os.Getenv("CORTIQ_TRACE_STEPS") == "1"
	return t
}

// envInt is the integer in the variable env when it lies in lo..hi, else 0
// (the default).
func envInt(env string, lo, hi int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n >= lo && n <= hi {
		return n
	}
	return 0
}

// autoFromEnv is the backend CORTIQ_GPU makes of --backend auto: 0 the
// CPU, 1 the device (forced, as --backend webgpu).
func autoFromEnv(backend string) string {
	if backend == "auto" {
		switch os.Getenv("CORTIQ_GPU") {
		case "0":
			return "cpu"
		case "1":
			return "webgpu"
		}
	}
	return backend
}

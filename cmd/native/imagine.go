package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/diffusion/cudadev"
	"github.com/cortiq/cortiq/diffusion/device"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/webgpu"
)

func init() {
	register("imagine", "imagine -m MODEL -p PROMPT [--steps 8] [--size WxH] [--seed S] [--guidance G] [--negative TEXT] [--backend auto|cpu|webgpu|cuda] -o OUT.png", "text to image with a diffusers Z-Image model (PNG out)", cmdImagine)
}

func cmdImagine(args []string) error {
	fs := newFlags("imagine")
	modelDir := fs.String("m", "", "model: a diffusers directory (model_index.json, transformer/, vae/, text_encoder/, tokenizer/, scheduler/) or the CMF file cortiq import makes of one")
	prompt := fs.String("p", "", "prompt")
	steps := fs.Int("steps", 8, "denoising steps")
	size := fs.String("size", "1024x1024", "image size WIDTHxHEIGHT (multiples of 16 for Z-Image)")
	seed := fs.Uint64("seed", 0, "seed of the initial noise (cortiq's generator; --latents gives exact noise)")
	guidance := fs.Float64("guidance", 0, "classifier-free guidance scale (0: none, as Z-Image-Turbo)")
	negative := fs.String("negative", "", "negative prompt (used with --guidance > 0)")
	cfgTrunc := fs.Float64("cfg-truncation", 1, "drop guidance on steps with t = 1 - timestep/1000 above this")
	cfgNorm := fs.Float64("cfg-normalization", 0, "cap the guided prediction's norm at this multiple of the positive one's (0: off)")
	quant := fs.String("dit-quant", "", "quantize the transformer blocks at load: q8_0 or q4_0 (default: the file's precision)")
	backendName := fs.String("backend", "auto", "backend: webgpu (transformer blocks and VAE decoder on the GPU; the text encoder and the embedders stay on the CPU), cuda (transformer blocks on an NVIDIA GPU's tensor cores, the rest as auto; without CUDA it says why and runs as auto), cpu, or auto (webgpu on a hardware GPU that takes the model, else cpu)")
	latents := fs.String("latents", "", "initial noise: a safetensors file with tensor \"latents\" [1,C,H/8,W/8] (diffusers' latents=)")
	rawOut := fs.String("raw-out", "", "also write the float image [3,H,W] in [0,1] before rounding as tensor \"image\" of this safetensors file")
	out := fs.String("o", "", "output PNG file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *modelDir == "" {
		return errors.New("-m MODEL is required")
	}
	if *out == "" {
		return errors.New("-o OUT.png is required")
	}
	switch *backendName {
	case "auto", "cpu", "webgpu", "cuda":
	default:
		return fmt.Errorf("--backend %q: want auto, cpu, webgpu or cuda", *backendName)
	}
	width, height, err := parseSize(*size)
	if err != nil {
		return err
	}
	if *steps <= 0 {
		return fmt.Errorf("--steps %d: must be positive", *steps)
	}
	for _, p := range []string{*out, *rawOut} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
			return fmt.Errorf("output %s: directory %s does not exist", p, filepath.Dir(p))
		}
	}
	if *rawOut != "" && filepath.Clean(*rawOut) == filepath.Clean(*out) {
		return errors.New("--raw-out and -o name the same file")
	}

	t0 := time.Now()
	pipe, err := diffusion.Open(*modelDir, diffusion.OpenOptions{DiTQuant: *quant})
	if err != nil {
		return err
	}
	defer pipe.Close()
	if err := pipe.CheckSize(width, height); err != nil {
		return fmt.Errorf("--size %s: %w", *size, err)
	}
	opts := diffusion.Options{
		Prompt: *prompt, Negative: *negative, Width: width, Height: height, Steps: *steps,
		Guidance: float32(*guidance), CFGTruncation: float32(*cfgTrunc), CFGNormalization: float32(*cfgNorm), Seed: *seed,
	}
	if *latents != "" {
		C, h, w := pipe.LatentShape(width, height)
		if opts.Latents, err = readLatents(*latents, C, h, w); err != nil {
			return err
		}
	}
	where, release, err := imagineDevice(pipe, *backendName, pipe.DiTQuant)
	if err != nil {
		return err
	}
	defer release()
	fmt.Fprintf(os.Stderr, "imagine: loaded %s in %.1fs (%s)\n", *modelDir, time.Since(t0).Seconds(), where)

	t1 := time.Now()
	pos, err := pipe.Encode(opts.Prompt)
	if err != nil {
		return fmt.Errorf("prompt: %w", err)
	}
	var neg diffusion.Features
	if opts.Guidance > 0 {
		if neg, err = pipe.Encode(opts.Negative); err != nil {
			return fmt.Errorf("negative prompt: %w", err)
		}
	}
	tEnc := time.Now()
	bar := newStepBar(os.Stderr, *steps)
	stepAt := []time.Time{tEnc} // when each step ended, after the encoder's end
	opts.Progress = func(i, n int) {
		stepAt = append(stepAt, time.Now())
		bar.step(i, n)
	}
	res, err := pipe.GenerateFromFeatures(opts, pos, neg)
	bar.finish()
	if err != nil {
		return err
	}
	// Where the time went: the text encoder, the steps (the first apart:
	// it builds the device pipelines), the VAE decode.
	n := len(stepAt) - 1
	last := stepAt[n]
	first := 0.0
	if n > 0 {
		first = stepAt[1].Sub(tEnc).Seconds()
	}
	rest := "-"
	if n > 1 {
		rest = fmt.Sprintf("%.3fs", last.Sub(stepAt[1]).Seconds()/float64(n-1))
	}
	fmt.Fprintf(os.Stderr, "imagine: phases: text encoder %.3fs, %d steps %.3fs (first %.3fs, then %s a step), VAE decode %.3fs\n",
		tEnc.Sub(t1).Seconds(), n, last.Sub(tEnc).Seconds(), first, rest, time.Since(last).Seconds())

	var png bytes.Buffer
	if err := diffusion.EncodePNG(&png, res.Image, res.Width, res.Height); err != nil {
		return err
	}
	var raw bytes.Buffer
	if *rawOut != "" {
		t := &tensor.Tensor{Name: "image", Codec: tensor.F32, Shape: []int{3, res.Height, res.Width}, Data: f32Bytes(res.Image)}
		if err := safetensors.Write(&raw, []*tensor.Tensor{t}); err != nil {
			return err
		}
		if err := writeFileAtomic(*rawOut, raw.Bytes()); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(*out, png.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "imagine: wrote %s (%dx%d, %d steps, %.1fs)\n", *out, res.Width, res.Height, *steps, time.Since(t1).Seconds())
	return nil
}

// parseSize reads WIDTHxHEIGHT.
func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(strings.ToLower(s), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w <= 0 || h <= 0 {
		return 0, 0, fmt.Errorf("--size %q: want WIDTHxHEIGHT, e.g. 1024x768", s)
	}
	return w, h, nil
}

// readLatents reads tensor "latents" holding C·h·w values ([1,C,h,w],
// [C,h,w] or [C,1,h,w]).
func readLatents(path string, C, h, w int) ([]float32, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, ok := f.Info("latents")
	if !ok {
		return nil, fmt.Errorf("--latents %s: no tensor \"latents\" (it has %v)", path, f.Names())
	}
	if info.Elements() != int64(C*h*w) {
		return nil, fmt.Errorf("--latents %s: tensor \"latents\" has shape %v, this size needs [1, %d, %d, %d]", path, info.Shape, C, h, w)
	}
	v, err := f.Float32s("latents")
	if err != nil {
		return nil, err
	}
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("--latents %s: tensor \"latents\" holds NaN or Inf", path)
		}
	}
	return v, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so a failure leaves no partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(0o644) // CreateTemp makes it 0600
	}
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		werr = os.Rename(tmp.Name(), path)
	} else if werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// stepBar shows denoising progress on one redrawn line (a terminal) or
// one line per step.
type stepBar struct {
	w     io.Writer
	total int
	tty   bool
	start time.Time
	drawn bool
}

func newStepBar(w io.Writer, total int) *stepBar {
	return &stepBar{w: w, total: total, tty: isTerminal(w), start: time.Now()}
}

func (b *stepBar) step(done, total int) {
	const width = 24
	fill := width * done / max(total, 1)
	el := time.Since(b.start).Seconds()
	per := el / float64(max(done, 1))
	line := fmt.Sprintf("imagine: step %d/%d [%s%s] %.2fs/step, %.0fs left", done, total,
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), per, per*float64(total-done))
	if b.tty {
		fmt.Fprintf(b.w, "\r%s\x1b[K", line)
		b.drawn = true
		return
	}
	fmt.Fprintln(b.w, line)
}

func (b *stepBar) finish() {
	if b.drawn {
		fmt.Fprintln(b.w)
	}
}

// imagineDevice puts the transformer blocks, the VAE decoder and the text
// encoder's feature layers (textEncoderDevice: optional) on the GPU
// for --backend webgpu (an error when it cannot) and auto (a hardware
// adapter only; anything that fails leaves the CPU, and says why). It
// returns where the pipeline runs and what releases the device.
// The device keeps the blocks' matrices in the pipeline's codec
// (--dit-quant, or the CMF file's; f32 without one).
func imagineDevice(pipe *diffusion.Pipeline, backend, quant string) (where string, release func(), err error) {
	if backend != "cuda" {
		return gpuDevices(pipe, backend, quant, false)
	}
	// --backend cuda: the transformer blocks on the CUDA device, the rest
	// as auto; without CUDA (no driver, no device, a model the kernels
	// refuse) it says why and everything runs as auto.
	msg, closeDiT, cerr := cudaDiT(pipe)
	if cerr != nil {
		where, release, err := gpuDevices(pipe, "auto", quant, false)
		return "cuda refused (" + cerr.Error() + "); " + where, release, err
	}
	where, rest, err := gpuDevices(pipe, "auto", quant, true)
	release = func() {
		rest()
		pipe.DiT.SetDevice(nil)
		closeDiT()
	}
	return msg + "; " + where, release, err
}

// gpuDevices is imagineDevice for webgpu and auto; with keepDiT the
// transformer blocks stay where they are (on CUDA).
func gpuDevices(pipe *diffusion.Pipeline, backend, quant string, keepDiT bool) (where string, release func(), err error) {
	var opened []func()
	release = func() {
		if !keepDiT {
			pipe.DiT.SetDevice(nil)
		}
		pipe.SetDecoder(nil)
		pipe.TextEncoder.SetLayers(nil)
		for i := len(opened) - 1; i >= 0; i-- {
			opened[i]()
		}
		opened = nil
	}
	if backend == "cpu" {
		return "cpu", release, nil
	}
	fail := func(err error) (string, func(), error) {
		release()
		if backend == "webgpu" {
			return "", nil, fmt.Errorf("--backend webgpu: %w", err)
		}
		return "cpu: " + err.Error(), release, nil
	}
	dev, err := gpu.Open(gpuOptions())
	if err != nil {
		return fail(err)
	}
	opened = append(opened, dev.Close)
	if backend == "auto" && dev.Info().Type == "cpu" {
		return fail(fmt.Errorf("%q is a software adapter (--backend webgpu uses it anyway)", dev.Info().Name))
	}
	where = "transformer blocks and VAE decoder on " + dev.Info().Name
	if keepDiT {
		where = "VAE decoder on " + dev.Info().Name
	} else {
		dspec, err := pipe.DiT.Spec()
		if err != nil {
			return fail(err)
		}
		var codec tensor.Codec // f32
		if quant != "" {
			if codec, err = tensor.ParseCodec(quant); err != nil {
				return fail(err)
			}
		}
		run, err := device.NewDiTRunner(dev, dspec, device.DiTOptions{Codec: codec})
		if err != nil {
			return fail(err)
		}
		opened = append(opened, run.Close)
		pipe.DiT.SetDevice(run)
	}
	vspec, err := pipe.VAE.Spec()
	if err != nil {
		return fail(err)
	}
	dec, err := device.NewVAEDecoder(dev, vspec, device.VAEOptions{})
	if err != nil {
		return fail(err)
	}
	opened = append(opened, dec.Close)
	pipe.SetDecoder(dec)
	// The text encoder's feature layers on the device too; where its model
	// does not go there, it stays on the CPU (and says why).
	if msg, err := textEncoderDevice(pipe.TextEncoder, dev, &opened); err != nil {
		where += "; text encoder on the CPU (" + err.Error() + ")"
	} else {
		where += "; " + msg
	}
	return where + "; embedders on the CPU", release, nil
}

// textEncoderDevice runs te's feature layers on dev (the webgpu backend of
// its model holding those layers), appending what releases it to opened.
func textEncoderDevice(te *diffusion.TextEncoder, dev *gpu.Device, opened *[]func()) (string, error) {
	b, err := webgpu.New(te.Model(), webgpu.Options{Device: dev, Layers: fmt.Sprintf("0-%d", te.Layers()-1)})
	if err != nil {
		return "", err
	}
	*opened = append(*opened, func() { b.Close() })
	te.SetLayers(b.NewSession)
	return fmt.Sprintf("text encoder layers 0-%d there too (its embeddings on the CPU)", te.Layers()-1), nil
}

// cudaDiT puts the transformer blocks on CUDA device 0 (f16 weights,
// whatever --dit-quant says: the blocks' matrices are decoded first),
// returning where they run and what releases them.
func cudaDiT(pipe *diffusion.Pipeline) (string, func(), error) {
	dev, err := driver.Open(0)
	if err != nil {
		return "", nil, err
	}
	spec, err := pipe.DiT.Spec()
	if err != nil {
		dev.Close()
		return "", nil, err
	}
	run, err := cudadev.NewDiTRunner(dev, spec, cudadev.DiTOptions{})
	if err != nil {
		dev.Close()
		return "", nil, err
	}
	pipe.DiT.SetDevice(run)
	return "transformer blocks on " + dev.Info().String() + " (f16 tensor cores)", func() {
		run.Close()
		dev.Close()
	}, nil
}

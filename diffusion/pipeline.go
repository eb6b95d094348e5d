// Package diffusion runs text-to-image pipelines stored in the Hugging Face
// diffusers layout, starting with Z-Image (diffusers' ZImagePipeline): a
// Qwen3 text encoder (run by the cpu engine), the ZImageTransformer2DModel
// DiT, the flow-matching Euler scheduler and the AutoencoderKL decoder.
//
// This is the float32 CPU reference: every component matches diffusers
// (float32, CPU) to about 1e-4, and the final image to a PSNR well above
// 60 dB on the same initial noise.
//
// # Layout
//
// Open takes a directory holding model_index.json and one folder per
// component role: text_encoder/ and tokenizer/ (transformers files),
// transformer/ and vae/ (config.json plus diffusion_pytorch_model
// safetensors, sharded or not, F32, F16 or BF16) and scheduler/
// (scheduler_config.json). Class names in model_index.json are not
// consulted: each component's config is recognised by its contents and
// anything this package cannot run exactly is refused with the file and
// the reason.
//
// # Generation
//
// Generate follows ZImagePipeline.__call__: prompt features (and the
// negative prompt's under classifier-free guidance, guidance > 0: v = v₊ +
// g·(v₊ − v₋)), sigmas linspace(1, 1/n, n) shifted by the scheduler
// config, for each step the transformer on t = 1 − σ, the Euler step with
// the negated output, then z/scaling_factor + shift_factor through the
// decoder and (x/2 + 0.5) clamped to [0, 1]. The initial latents are
// either given (diffusers' latents=, so a run can be compared with any
// other implementation) or drawn from a seeded Gaussian of this package
// (which does not reproduce torch's generator).
package diffusion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

// Pipeline is a loaded Z-Image pipeline.
type Pipeline struct {
	Dir         string
	TextEncoder *TextEncoder
	DiT         *DiT
	VAE         *VAE
	Scheduler   Scheduler
	closers     []func() error
	decoder     Decoder
	// DiTQuant is the codec of the transformer blocks' matrices when they
	// were re-encoded ("q8_0", "q4_0"; at load or in the CMF file), "" when
	// they keep the checkpoint's precision. A device backend can store
	// them so.
	DiTQuant string
}

// Decoder runs the VAE decoder elsewhere (a device): z [latent_channels,
// h, w], already unscaled, to the raw image [out_channels, h·s, w·s].
type Decoder interface {
	Decode(z []float32, h, w int) ([]float32, error)
}

// SetDecoder makes DecodeLatents use d (nil: the CPU reference).
func (p *Pipeline) SetDecoder(d Decoder) { p.decoder = d }

// OpenOptions tunes Open.
type OpenOptions struct {
	// MaxSequenceLength is the longest prompt in tokens (0: 512, the
	// pipeline's default max_sequence_length).
	MaxSequenceLength int
	// DiTQuant re-encodes the transformer blocks' matrices (attention,
	// feed-forward, modulation) at load: "" keeps the file's precision,
	// "q8_0" or "q4_0" quantize (rows that are not whole 32-blocks stay).
	// The embedders, the final layer, the VAE and the text encoder keep
	// theirs.
	DiTQuant string
}

// Roles are the component folders a Z-Image pipeline needs.
var Roles = []string{"scheduler", "text_encoder", "tokenizer", "transformer", "vae"}

// Open loads the pipeline in path: a diffusers directory, or a CMF file
// SaveCMF wrote.
func Open(path string, opts OpenOptions) (*Pipeline, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("diffusion: %w", err)
	}
	if !st.IsDir() {
		if isCMF(path) {
			return openCMF(path, opts)
		}
		return nil, fmt.Errorf("diffusion: %s is neither a diffusers model directory (with model_index.json) nor a CMF file", path)
	}
	return openDir(path, opts)
}

// parts are a pipeline's components before they are checked and built:
// raw configs, tensor sources, the text encoder and tokenizer material.
type parts struct {
	schedName, ditName, vaeName string // names errors use
	sched, dit, vae             []byte
	ditW, vaeW                  tensorSource
	ditWName, vaeWName          string
	te                          *model.Model
	teName                      string
	tok                         *model.TokenizerData
	tokName                     string
}

func openDir(dir string, opts OpenOptions) (p *Pipeline, err error) {
	idxPath := filepath.Join(dir, "model_index.json")
	b, err := os.ReadFile(idxPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("diffusion: %s is not a diffusers model directory: no model_index.json", dir)
		}
		return nil, fmt.Errorf("diffusion: %w", err)
	}
	var index map[string]json.RawMessage
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, fmt.Errorf("diffusion: %s: %w", idxPath, err)
	}
	for _, role := range Roles {
		if st, err := os.Stat(filepath.Join(dir, role)); err != nil || !st.IsDir() {
			listed := ""
			if _, ok := index[role]; ok {
				listed = " (model_index.json lists it)"
			}
			return nil, fmt.Errorf("diffusion: %s: missing component %s/%s", dir, role, listed)
		}
	}
	p = &Pipeline{Dir: dir}
	opened := p
	defer func() {
		if err != nil {
			opened.Close()
		}
	}()
	pt := &parts{
		schedName: filepath.Join(dir, "scheduler", "scheduler_config.json"),
		ditName:   filepath.Join(dir, "transformer", "config.json"),
		vaeName:   filepath.Join(dir, "vae", "config.json"),
		ditWName:  filepath.Join(dir, "transformer"),
		vaeWName:  filepath.Join(dir, "vae"),
		teName:    filepath.Join(dir, "text_encoder"),
		tokName:   filepath.Join(dir, "tokenizer"),
	}
	for _, c := range []struct {
		path string
		dst  *[]byte
	}{{pt.schedName, &pt.sched}, {pt.ditName, &pt.dit}, {pt.vaeName, &pt.vae}} {
		if *c.dst, err = os.ReadFile(c.path); err != nil {
			return nil, fmt.Errorf("diffusion: %w", err)
		}
	}
	if pt.ditW, err = p.openWeights(pt.ditWName); err != nil {
		return nil, err
	}
	if pt.vaeW, err = p.openWeights(pt.vaeWName); err != nil {
		return nil, err
	}
	if pt.tok, err = readTokenizerDir(pt.tokName); err != nil {
		return nil, fmt.Errorf("diffusion: %w", err)
	}
	if pt.te, err = openTextEncoderModel(pt.teName); err != nil {
		return nil, err
	}
	if pt.te.Close != nil {
		p.closers = append(p.closers, pt.te.Close)
	}
	if err := p.assemble(pt, opts); err != nil {
		return nil, err
	}
	return p, nil
}

// assemble checks the configs by their contents and builds the components.
func (p *Pipeline) assemble(pt *parts, opts OpenOptions) error {
	maxTok := opts.MaxSequenceLength
	if maxTok <= 0 {
		maxTok = 512
	}
	var raw map[string]json.RawMessage
	parse := func(name string, b []byte) error {
		raw = nil
		if err := json.Unmarshal(b, &raw); err != nil {
			return fmt.Errorf("diffusion: %s: %w", name, err)
		}
		return nil
	}

	if err := parse(pt.schedName, pt.sched); err != nil {
		return err
	}
	if !isSchedulerConfig(raw) {
		return fmt.Errorf("diffusion: %s is not a flow-matching scheduler config (no num_train_timesteps/shift)", pt.schedName)
	}
	var err error
	if p.Scheduler, err = ParseScheduler(pt.sched); err != nil {
		return fmt.Errorf("diffusion: %s: %w", pt.schedName, err)
	}

	if err := parse(pt.ditName, pt.dit); err != nil {
		return err
	}
	if !isDiTConfig(raw) {
		return fmt.Errorf("diffusion: %s: not a Z-Image transformer config (no cap_feat_dim, axes_dims, n_refiner_layers)", pt.ditName)
	}
	dc, err := parseDiTConfig(pt.dit)
	if err != nil {
		return fmt.Errorf("diffusion: %s: %w", pt.ditName, err)
	}
	tw := &weights{set: pt.ditW, dir: pt.ditWName, used: map[string]bool{}}
	switch opts.DiTQuant {
	case "":
	case "q8_0", "q4_0":
		c, _ := tensor.ParseCodec(opts.DiTQuant)
		tw.quant = &c
	default:
		return fmt.Errorf("diffusion: transformer quantization %q: want q8_0 or q4_0", opts.DiTQuant)
	}
	p.DiTQuant = opts.DiTQuant
	if p.DiT, err = loadDiT(tw, dc); err != nil {
		return fmt.Errorf("diffusion: %w", err)
	}

	if err := parse(pt.vaeName, pt.vae); err != nil {
		return err
	}
	if !isVAEConfig(raw) {
		return fmt.Errorf("diffusion: %s: not an autoencoder config (no latent_channels, block_out_channels, up_block_types)", pt.vaeName)
	}
	vc, err := parseVAEConfig(pt.vae)
	if err != nil {
		return fmt.Errorf("diffusion: %s: %w", pt.vaeName, err)
	}
	if vc.LatentChannels != dc.InChannels {
		return fmt.Errorf("diffusion: %s: the vae has %d latent channels, the transformer %d", pt.vaeName, vc.LatentChannels, dc.InChannels)
	}
	if p.VAE, err = loadVAE(&weights{set: pt.vaeW, dir: pt.vaeWName, used: map[string]bool{}}, vc); err != nil {
		return fmt.Errorf("diffusion: %w", err)
	}

	te, err := newTextEncoder(pt.te, pt.teName, pt.tok, pt.tokName, maxTok)
	if err != nil {
		return fmt.Errorf("diffusion: %w", err)
	}
	p.TextEncoder = te
	if te.Hidden != dc.CapFeatDim {
		return fmt.Errorf("diffusion: %s: the text encoder's hidden size %d is not the transformer's cap_feat_dim %d", pt.teName, te.Hidden, dc.CapFeatDim)
	}
	return nil
}

// readConfig reads a JSON object file.
func readConfig(path string) (map[string]json.RawMessage, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("diffusion: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil, fmt.Errorf("diffusion: %s: %w", path, err)
	}
	return raw, b, nil
}

// openWeights opens a component's safetensors: the diffusers index when
// present, else diffusion_pytorch_model.safetensors, else every
// *.safetensors file of the folder.
func (p *Pipeline) openWeights(dir string) (tensorSource, error) {
	var set *safetensors.Set
	var err error
	idx := filepath.Join(dir, "diffusion_pytorch_model.safetensors.index.json")
	single := filepath.Join(dir, "diffusion_pytorch_model.safetensors")
	switch {
	case fileExists(idx):
		set, err = safetensors.OpenIndex(idx)
	case fileExists(single):
		set, err = safetensors.OpenFiles(single)
	default:
		set, err = safetensors.OpenDir(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("diffusion: %w", err)
	}
	p.closers = append(p.closers, set.Close)
	return set, nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// Close releases the weights.
func (p *Pipeline) Close() error {
	if p == nil {
		return nil
	}
	var first error
	for _, c := range p.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	p.closers = nil
	return first
}

// SizeMultiple is the multiple image sides must be: the VAE's scale times
// the 2×2 patch.
func (p *Pipeline) SizeMultiple() int { return p.VAE.ScaleFactor() * patch }

// Options are one generation's settings.
type Options struct {
	Prompt   string
	Negative string // the negative prompt under guidance ("" as diffusers' default)
	Width    int
	Height   int
	Steps    int
	// Guidance > 0 runs classifier-free guidance (ZImagePipeline's
	// guidance_scale; Z-Image-Turbo uses 0).
	Guidance float32
	// CFGTruncation: guidance is dropped on steps whose t = 1 − timestep/1000
	// exceeds it (diffusers' cfg_truncation; 0 means 1, never).
	CFGTruncation float32
	// CFGNormalization > 0 caps the guided prediction's norm at this
	// multiple of the positive one's (diffusers' cfg_normalization).
	CFGNormalization float32
	Seed             uint64
	// Latents, when set, are the initial noise [channels, H/s, W/s]
	// (diffusers' latents=); otherwise it is drawn from Seed.
	Latents []float32
	// Progress, when set, is called after each step (1-based).
	Progress func(step, steps int)
	// Context, when set, is checked before each step; its error ends the
	// generation.
	Context context.Context
}

// Result is a generated image.
type Result struct {
	Width, Height int
	// Image is the decoded image [3, Height, Width] in [0, 1] (diffusers'
	// output_type="pt", before rounding to 8 bits).
	Image []float32
	// Latents are the final latents [channels, Height/s, Width/s].
	Latents []float32
	// StepLatents are the latents after each step, when requested.
	StepLatents [][]float32
}

// LatentShape is the latents' [channels, h, w] for an image size.
func (p *Pipeline) LatentShape(width, height int) (c, h, w int) {
	s := p.VAE.ScaleFactor()
	return p.DiT.Config.InChannels, 2 * (height / (s * 2)), 2 * (width / (s * 2))
}

// CheckSize reports whether an image size is one the pipeline can make.
func (p *Pipeline) CheckSize(width, height int) error {
	m := p.SizeMultiple()
	if width <= 0 || height <= 0 || width%m != 0 || height%m != 0 {
		return fmt.Errorf("image size %dx%d: width and height must be positive multiples of %d", width, height, m)
	}
	_, h, w := p.LatentShape(width, height)
	return p.DiT.CheckSizes(h, w, 1)
}

// Features are a prompt's caption features.
type Features struct {
	Rows int
	Data []float32 // [Rows, cap_feat_dim]
}

// Encode runs the text encoder on a prompt.
func (p *Pipeline) Encode(prompt string) (Features, error) {
	h, n, err := p.TextEncoder.Encode(prompt)
	if err != nil {
		return Features{}, err
	}
	if err := p.DiT.CheckSizes(2, 2, n); err != nil {
		return Features{}, fmt.Errorf("%w: %v", ErrPromptTooLong, err)
	}
	return Features{Rows: n, Data: h}, nil
}

// Generate makes one image.
func (p *Pipeline) Generate(o Options) (*Result, error) {
	if err := p.CheckSize(o.Width, o.Height); err != nil {
		return nil, err
	}
	if o.Steps <= 0 {
		return nil, fmt.Errorf("diffusion: %d steps", o.Steps)
	}
	pos, err := p.Encode(o.Prompt)
	if err != nil {
		return nil, err
	}
	var neg Features
	if o.Guidance > 0 {
		if neg, err = p.Encode(o.Negative); err != nil {
			return nil, fmt.Errorf("negative prompt: %w", err)
		}
	}
	return p.GenerateFromFeatures(o, pos, neg)
}

// GenerateFromFeatures is Generate with the prompt features given (neg is
// used only under guidance).
func (p *Pipeline) GenerateFromFeatures(o Options, pos, neg Features) (*Result, error) {
	if err := p.CheckSize(o.Width, o.Height); err != nil {
		return nil, err
	}
	if t, ok := p.DiT.device.(DiTTrimmer); ok {
		defer t.Trim()
	}
	C, h, w := p.LatentShape(o.Width, o.Height)
	lat := make([]float32, C*h*w)
	if o.Latents != nil {
		if len(o.Latents) != len(lat) {
			return nil, fmt.Errorf("diffusion: initial latents have %d values, a %dx%d image needs %d×%d×%d = %d", len(o.Latents), o.Width, o.Height, C, h, w, len(lat))
		}
		copy(lat, o.Latents)
	} else {
		r := rand.New(rand.NewPCG(o.Seed, 0x7a696d616765)) // "zimage"
		for i := range lat {
			lat[i] = float32(r.NormFloat64())
		}
	}
	seq := (h / 2) * (w / 2)
	sigmas, timesteps, err := p.Scheduler.Sigmas(o.Steps, seq)
	if err != nil {
		return nil, err
	}
	trunc := o.CFGTruncation
	if trunc == 0 {
		trunc = 1
	}
	res := &Result{Width: o.Width, Height: o.Height}
	for i, ts := range timesteps {
		if o.Context != nil {
			if err := o.Context.Err(); err != nil {
				return nil, err
			}
		}
		t := (1000 - ts) / 1000
		g := o.Guidance
		cfg := g > 0 && t <= trunc
		caps, rows := [][]float32{pos.Data}, []int{pos.Rows}
		if cfg {
			// The prompt's and the negative prompt's passes as one batch.
			caps, rows = append(caps, neg.Data), append(rows, neg.Rows)
		}
		vs, err := p.DiT.ForwardBatch(lat, h, w, t, caps, rows)
		if err != nil {
			return nil, err
		}
		v := vs[0]
		if cfg {
			vn := vs[1]
			var posNorm, predNorm float64
			for j := range v {
				pred := v[j] + g*(v[j]-vn[j])
				posNorm += float64(v[j]) * float64(v[j])
				predNorm += float64(pred) * float64(pred)
				vn[j] = pred
			}
			if c := o.CFGNormalization; c > 0 {
				maxNorm := math.Sqrt(posNorm) * float64(c)
				if n := math.Sqrt(predNorm); n > maxNorm {
					s := float32(maxNorm / n)
					for j := range vn {
						vn[j] *= s
					}
				}
			}
			v = vn
		}
		for j := range v {
			v[j] = -v[j]
		}
		Step(lat, v, sigmas[i], sigmas[i+1])
		res.StepLatents = append(res.StepLatents, append([]float32(nil), lat...))
		if o.Progress != nil {
			o.Progress(i+1, len(timesteps))
		}
	}
	res.Latents = lat
	img, err := p.DecodeLatents(lat, h, w)
	if err != nil {
		return nil, err
	}
	res.Image = img
	return res, nil
}

// DecodeLatents unscales latents (z/scaling_factor + shift_factor), runs
// the decoder and maps its output to [0, 1].
func (p *Pipeline) DecodeLatents(lat []float32, h, w int) ([]float32, error) {
	c := p.VAE.Config
	z := make([]float32, len(lat))
	var shift float32
	if c.ShiftFactor != nil {
		shift = *c.ShiftFactor
	}
	for i, v := range lat {
		z[i] = v/c.ScalingFactor + shift
	}
	dec := Decoder(p.VAE)
	if p.decoder != nil {
		dec = p.decoder
	}
	img, err := dec.Decode(z, h, w)
	if err != nil {
		return nil, err
	}
	for i, v := range img {
		img[i] = min(max(v*0.5+0.5, 0), 1)
	}
	return img, nil
}

package diffusion

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// A pipeline as one CMF file (docs/cmf.md, "Text-to-image pipelines"):
// the metadata's arch and tokenizer are the text encoder's, its tensors
// keep their canonical names; the transformer's and the VAE decoder's
// tensors keep their diffusers names under "transformer/" and "vae/"; the
// diffusers configs ride in extra.diffusers.

// cmfExtraKey marks a CMF file as a text-to-image pipeline.
const cmfExtraKey = "diffusers"

// cmfExtra is extra.diffusers.
type cmfExtra struct {
	FormatVersion int             `json:"format_version"`
	ModelIndex    json.RawMessage `json:"model_index,omitempty"`
	Scheduler     json.RawMessage `json:"scheduler"`
	Transformer   json.RawMessage `json:"transformer"`
	VAE           json.RawMessage `json:"vae"`
	DiTQuant      string          `json:"dit_quant,omitempty"`
}

// SaveOptions chooses SaveCMF's encodings.
type SaveOptions struct {
	// DiTQuant re-encodes the transformer blocks' matrices ("q8_0",
	// "q4_0"; "" keeps them), as OpenOptions.DiTQuant does at load. The
	// other tensors keep their encoding.
	DiTQuant string
}

// ditBlockMatrix matches the transformer-block matrices DiTQuant covers.
var ditBlockMatrix = regexp.MustCompile(`^(noise_refiner|context_refiner|layers)\.\d+\.(attention\.to_(q|k|v|out\.0)|feed_forward\.w[123]|adaLN_modulation\.0)\.weight$`)

// SaveCMF writes the diffusers pipeline in dir as one CMF file at path
// (through a temporary file beside it, renamed into place). The pipeline
// is opened first, so a file is written only for a pipeline that loads.
// The VAE's encoder is left out: text to image never runs it.
func SaveCMF(dir, path string, opts SaveOptions) error {
	p, err := Open(dir, OpenOptions{DiTQuant: opts.DiTQuant})
	if err != nil {
		return err
	}
	p.Close()
	var quant *tensor.Codec
	if opts.DiTQuant != "" {
		c, _ := tensor.ParseCodec(opts.DiTQuant)
		quant = &c
	}

	q := &Pipeline{}
	defer q.Close()
	ditW, err := q.openWeights(filepath.Join(dir, "transformer"))
	if err != nil {
		return err
	}
	vaeW, err := q.openWeights(filepath.Join(dir, "vae"))
	if err != nil {
		return err
	}
	te, err := openTextEncoderModel(filepath.Join(dir, "text_encoder"))
	if err != nil {
		return err
	}
	if te.Close != nil {
		q.closers = append(q.closers, te.Close)
	}
	tok, err := readTokenizerDir(filepath.Join(dir, "tokenizer"))
	if err != nil {
		return fmt.Errorf("diffusion: %w", err)
	}

	extra := cmfExtra{FormatVersion: 1, DiTQuant: opts.DiTQuant}
	for _, c := range []struct {
		dst  *json.RawMessage
		path string
	}{
		{&extra.ModelIndex, "model_index.json"}, {&extra.Scheduler, "scheduler/scheduler_config.json"},
		{&extra.Transformer, "transformer/config.json"}, {&extra.VAE, "vae/config.json"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, c.path))
		if err != nil {
			return fmt.Errorf("diffusion: %w", err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return fmt.Errorf("diffusion: %s: %w", filepath.Join(dir, c.path), err)
		}
		*c.dst = buf.Bytes()
	}
	xb, err := json.Marshal(extra)
	if err != nil {
		return err
	}
	prov, err := digestDir(dir)
	if err != nil {
		return fmt.Errorf("diffusion: %w", err)
	}
	meta := &cmf.Metadata{Arch: te.Arch, Tokenizer: tok, Provenance: prov, CreatedBy: "cortiq",
		Extra: map[string]json.RawMessage{cmfExtraKey: xb}}

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("diffusion: %w", err)
	}
	tmpName := tmp.Name()
	w, err := cmf.NewWriter(tmp, meta)
	if err != nil {
		tmp.Close()
		os.Remove(tmpName)
		return err
	}
	fail := func(err error) error {
		w.Close()
		tmp.Close()
		os.Remove(tmpName)
		return err
	}
	write := func(name string, t *tensor.Tensor) error {
		c := *t
		c.Name = name
		return w.WriteTensor(&c)
	}
	teNames := te.Weights.Names()
	sort.Strings(teNames)
	for _, n := range teNames {
		t, ok := te.Weights.Tensor(n)
		if !ok {
			return fail(fmt.Errorf("diffusion: text encoder tensor %q listed but absent", n))
		}
		if err := write(n, t); err != nil {
			return fail(err)
		}
	}
	for _, src := range []struct {
		set    tensorSource
		prefix string
		keep   func(string) bool
	}{
		{ditW, "transformer/", func(string) bool { return true }},
		{vaeW, "vae/", func(n string) bool {
			return strings.HasPrefix(n, "decoder.") || strings.HasPrefix(n, "post_quant_conv.")
		}},
	} {
		names := src.set.Names()
		sort.Strings(names)
		for _, n := range names {
			if !src.keep(n) {
				continue
			}
			t, err := src.set.Tensor(n)
			if err != nil {
				return fail(err)
			}
			if quant != nil && src.prefix == "transformer/" && ditBlockMatrix.MatchString(n) &&
				len(t.Shape) == 2 && t.Shape[1]%quant.BlockLen() == 0 {
				if t, err = reencode(t, *quant); err != nil {
					return fail(fmt.Errorf("diffusion: tensor %q: %w", n, err))
				}
			}
			if err := write(src.prefix+n, t); err != nil {
				return fail(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmpName)
		return err
	}
	if err := os.Rename(tmpName, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("diffusion: %w", err)
	}
	return nil
}

// reencode converts a float tensor to codec c through float32.
func reencode(t *tensor.Tensor, c tensor.Codec) (*tensor.Tensor, error) {
	src := make([]float32, t.Elements())
	if err := tensor.Dequantize(src, t.Codec, t.Data); err != nil {
		return nil, err
	}
	n, err := tensor.ByteLen(c, t.Shape)
	if err != nil {
		return nil, err
	}
	dst := make([]byte, n)
	if err := tensor.Quantize(dst, c, src); err != nil {
		return nil, err
	}
	return &tensor.Tensor{Name: t.Name, Codec: c, Shape: append([]int(nil), t.Shape...), Data: dst}, nil
}

// digestDir lists the pipeline's source files with their SHA-256.
func digestDir(dir string) (model.Provenance, error) {
	prov := model.Provenance{Format: "diffusers"}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		role := strings.Split(filepath.ToSlash(rel), "/")[0]
		keep := rel == "model_index.json"
		for _, r := range Roles {
			keep = keep || role == r
		}
		if !keep || (role == "vae" && strings.HasSuffix(rel, ".md")) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		prov.Files = append(prov.Files, model.SourceFile{Name: filepath.ToSlash(rel), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	return prov, err
}

// isCMF reports whether path starts with the CMF magic.
func isCMF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return string(b[:]) == "CMF\x00"
}

// IsPipelineCMF reports whether an opened CMF file holds a text-to-image
// pipeline rather than a language model.
func IsPipelineCMF(f *cmf.File) bool {
	_, ok := f.Meta.Extra[cmfExtraKey]
	return ok
}

// cmfPrefix is the tensors of a CMF file under a name prefix.
type cmfPrefix struct {
	f      *cmf.File
	prefix string
}

func (c cmfPrefix) Has(name string) bool { _, ok := c.f.Entry(c.prefix + name); return ok }

func (c cmfPrefix) Tensor(name string) (*tensor.Tensor, error) {
	t, err := c.f.Tensor(c.prefix + name)
	if err != nil {
		return nil, err
	}
	t.Name = name
	return t, nil
}

func (c cmfPrefix) Names() []string {
	var out []string
	for _, n := range c.f.Names() {
		if rest, ok := strings.CutPrefix(n, c.prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

func openCMF(path string, opts OpenOptions) (p *Pipeline, err error) {
	f, err := cmf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("diffusion: %w", err)
	}
	return OpenCMFFile(f, opts)
}

// OpenCMFFile builds a pipeline from an opened CMF file (memory-mapped, or
// read through ranges); Close closes the file.
func OpenCMFFile(f *cmf.File, opts OpenOptions) (p *Pipeline, err error) {
	p = &Pipeline{Dir: f.Name, closers: []func() error{f.Close}}
	opened := p
	defer func() {
		if err != nil {
			opened.Close()
		}
	}()
	raw, ok := f.Meta.Extra[cmfExtraKey]
	if !ok {
		return nil, fmt.Errorf("diffusion: %s is a CMF file without a text-to-image pipeline (no extra.%s)", f.Name, cmfExtraKey)
	}
	var x cmfExtra
	if err := json.Unmarshal(raw, &x); err != nil {
		return nil, fmt.Errorf("diffusion: %s: extra.%s: %w", f.Name, cmfExtraKey, err)
	}
	if x.FormatVersion != 1 {
		return nil, fmt.Errorf("diffusion: %s: extra.%s.format_version %d (this reader knows 1)", f.Name, cmfExtraKey, x.FormatVersion)
	}
	teW := model.MapWeights{}
	for _, n := range f.Names() {
		if strings.Contains(n, "/") {
			continue
		}
		t, err := f.Tensor(n)
		if err != nil {
			return nil, fmt.Errorf("diffusion: %w", err)
		}
		teW[n] = t
	}
	if err := f.Meta.Arch.Validate(); err != nil {
		return nil, fmt.Errorf("diffusion: %s: text encoder: %w", f.Name, err)
	}
	name := func(s string) string { return f.Name + ": " + s }
	pt := &parts{
		schedName: name("extra.diffusers.scheduler"), ditName: name("extra.diffusers.transformer"), vaeName: name("extra.diffusers.vae"),
		sched: x.Scheduler, dit: x.Transformer, vae: x.VAE,
		ditW: cmfPrefix{f, "transformer/"}, vaeW: cmfPrefix{f, "vae/"},
		ditWName: name("transformer/"), vaeWName: name("vae/"),
		te:     &model.Model{Arch: f.Meta.Arch, Weights: teW, Tokenizer: f.Meta.Tokenizer},
		teName: name("text encoder"), tok: f.Meta.Tokenizer, tokName: name("tokenizer"),
	}
	if err := p.assemble(pt, opts); err != nil {
		return nil, err
	}
	if p.DiTQuant == "" {
		p.DiTQuant = x.DiTQuant
	}
	return p, nil
}

// IsPipeline reports whether path holds a text-to-image pipeline: a
// directory with model_index.json, or a CMF file SaveCMF wrote.
func IsPipeline(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if st.IsDir() {
		_, err := os.Stat(filepath.Join(path, "model_index.json"))
		return err == nil
	}
	if !isCMF(path) {
		return false
	}
	f, err := cmf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return IsPipelineCMF(f)
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/tokenizer"
	"github.com/cortiq/cortiq/writer"
)

func init() {
	register("logits", "logits -m MODEL --ids 1,2,3 -o OUT.safetensors [flags]", "write the logits of every prompt position to a safetensors file", cmdLogits)
	register("import", "import SRC -o OUT.cmf|OUT.gguf [--quant CODEC [--calib FILE.txt [--act-order]]]", "convert an HF directory or GGUF file to CMF or GGUF (optionally quantized)", cmdImport)
	register("info", "info -m MODEL", "show a model's architecture, codecs and sizes", cmdInfo)
	register("tokenize", "tokenize -m MODEL [--special] [--json] < TEXT", "tokenize stdin with a model's tokenizer", cmdTokenize)
	register("detokenize", "detokenize -m MODEL --ids 1,2,3 [--skip-special]", "turn token ids back into text", cmdDetokenize)
}

func cmdLogits(args []string) error {
	fs := newFlags("logits")
	var mf modelFlags
	mf.register(fs)
	idsFlag := fs.String("ids", "", "token ids, comma separated")
	out := fs.String("o", "", "output .safetensors file (tensor \"logits\" f32 [len(ids), vocab])")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-o OUT.safetensors is required")
	}
	ids, err := parseIDs(*idsFlag)
	if err != nil {
		return err
	}
	ctx, cancel := interruptible()
	defer cancel()
	e, err := mf.load(ctx)
	if err != nil {
		return err
	}
	defer e.Close()
	logits, err := e.Logits(ctx, ids)
	if err != nil {
		return err
	}
	return writeLogits(*out, logits, len(ids), e.Model.Arch.Vocab)
}

func openModel(nameOrPath string) (*model.Model, error) {
	path, err := resolvePath(nameOrPath)
	if err != nil {
		return nil, err
	}
	ctx, cancel := interruptible()
	defer cancel()
	return importer.Open(ctx, path)
}

// resolvePath turns a model name or path into a local path, downloading
// when needed.
func resolvePath(nameOrPath string) (string, error) {
	ctx, cancel := interruptible()
	defer cancel()
	return newResolver().Resolve(ctx, nameOrPath)
}

func cmdImport(args []string) error {
	fs := newFlags("import")
	out := fs.String("o", "", "output file: .cmf, or .gguf for llama.cpp (families llama.cpp knows)")
	quant := fs.String("quant", "", "requantize weights: f32, f16, bf16 or a block codec (q8_0, q4_0, q4_K, …, the seed's q8_row, q8_2f, q4_tiled, q4tp, q2tp, q1, q1g, q1t, blr) (default: keep)")
	calib := fs.String("calib", "", "calibration text: quantize the linear weights with GPTQ on its input statistics (CPU)")
	actOrder := fs.Bool("act-order", false, "with --calib: GPTQ in order of decreasing Hessian diagonal")
	window := fs.Int("calib-window", 256, "with --calib: tokens per calibration sequence")
	// Accept the source before or after the flags.
	var src string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		src, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if src == "" && fs.NArg() > 0 {
		src = fs.Arg(0)
	}
	if src == "" || *out == "" {
		return usageError{fs, errors.New("want a source and -o OUT.cmf (or OUT.gguf)")}
	}
	toGGUF := strings.EqualFold(filepath.Ext(*out), ".gguf")
	if diffusion.IsPipeline(src) {
		if toGGUF {
			return fmt.Errorf("-o %s: a text-to-image pipeline is written as CMF only", *out)
		}
		// A text-to-image pipeline: one CMF file; --quant covers the
		// transformer blocks only.
		if *quant != "" && *quant != "q8_0" && *quant != "q4_0" {
			return fmt.Errorf("--quant %q: a diffusers pipeline takes q8_0 or q4_0 (its transformer blocks; the VAE and the text encoder keep their precision)", *quant)
		}
		if err := diffusion.SaveCMF(src, *out, diffusion.SaveOptions{DiTQuant: *quant}); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
		return nil
	}
	var codec tensor.Codec
	keep := *quant == ""
	if !keep {
		c, err := tensor.ParseCodec(*quant)
		if err != nil || c == tensor.I32 || !tensor.Encodes(c) {
			return fmt.Errorf("--quant %q: want f32, f16, bf16 or a block codec (q8_0, q4_0, q4_K, q6_K, q4tp, q2tp, …)", *quant)
		}
		codec = c
	}
	if *calib != "" && keep {
		return fmt.Errorf("--calib: GPTQ needs --quant with one of %s", strings.Join(gptqCodecs(), ", "))
	}
	if *calib != "" && !tensor.CanSetElem(codec) {
		return fmt.Errorf("--calib: GPTQ does not write %s; it needs --quant with one of %s", codec, strings.Join(gptqCodecs(), ", "))
	}
	m, err := openModel(src)
	if err != nil {
		return err
	}
	defer closeModel(m)
	opts := writer.SaveOptions{Quant: codec, Keep: keep}
	if *calib != "" {
		enc, err := gptqEncoder(m, *calib, codec, *window, *actOrder)
		if err != nil {
			return err
		}
		opts.Encode = enc
	}
	save := writer.SaveCMF
	if toGGUF {
		save = writer.SaveGGUF
	}
	if err := save(m, *out, opts); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
	return nil
}

func closeModel(m *model.Model) {
	if m.Close != nil {
		m.Close()
	}
}

func cmdInfo(args []string) error {
	fs := newFlags("info")
	name := fs.String("m", "", "model")
	jsonOut := fs.Bool("json", false, "print the normalized architecture as JSON")
	ctxN := fs.Int("ctx", 0, "print the memory one session of this context needs per backend (KV, recurrent state, activations)")
	kv := fs.String("kv", "f32", "KV cache element for --ctx: f32 or f16")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := openModel(*name)
	if err != nil {
		// A GGUF the importer refuses (a tensor type no codec holds) still
		// shows what it holds.
		if f, gerr := gguf.Open(*name); gerr == nil {
			printGGUFTypes(f)
			f.Close()
		}
		return err
	}
	defer closeModel(m)
	// What run would refuse, info refuses too.
	if err := engine.Check(m); err != nil {
		return err
	}
	if *kv != "f32" && *kv != "f16" {
		return fmt.Errorf("--kv %q: want f32 or f16", *kv)
	}
	if *ctxN < 0 || (*ctxN > 0 && m.Arch.Context > 0 && *ctxN > max(m.Arch.Context, 4096)) {
		return fmt.Errorf("--ctx %d: want 1..%d (the model's context)", *ctxN, max(m.Arch.Context, 4096))
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(m.Arch)
	}
	a := m.Arch
	fmt.Printf("family      %s\n", a.Family)
	fmt.Printf("layers      %d (hidden %d, vocab %d, context %d)\n", len(a.Layers), a.Hidden, a.Vocab, a.Context)
	mixers := map[string]int{}
	for _, l := range a.Layers {
		k := string(l.Mixer) + "+" + string(l.FFN)
		mixers[k]++
	}
	var kinds []string
	for k, v := range mixers {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, v))
	}
	sort.Strings(kinds)
	fmt.Printf("layer kinds %s\n", strings.Join(kinds, ", "))
	if l := a.Layers[0]; l.Attn != nil {
		at := l.Attn
		fmt.Printf("attention   %d heads, %d kv heads, head_dim %d, rope %s theta %g dims %d\n", at.Heads, at.KVHeads, at.HeadDim, at.Rope.Style, at.Rope.Theta, at.Rope.Dims)
	}
	names := m.Weights.Names()
	sort.Strings(names)
	bytesBy := map[tensor.Codec]int64{}
	countBy := map[tensor.Codec]int{}
	var params int64
	for _, n := range names {
		t, ok := m.Weights.Tensor(n)
		if !ok {
			if err := model.WeightsErr(m.Weights); err != nil {
				return err
			}
			return fmt.Errorf("%s: tensor %q listed but absent", *name, n)
		}
		// The size the shape implies: an unmapped file's tensors have no
		// data yet.
		b, err := tensor.ByteLen(t.Codec, t.Shape)
		if err != nil {
			b = int64(len(t.Data))
		}
		bytesBy[t.Codec] += b + int64(len(t.Side)) // q8_2f's column field, blr's factors
		countBy[t.Codec]++
		params += int64(t.Elements())
	}
	codecs := make([]tensor.Codec, 0, len(bytesBy))
	for c := range bytesBy {
		codecs = append(codecs, c)
	}
	sort.Slice(codecs, func(i, j int) bool { return codecs[i] < codecs[j] })
	var total int64
	for _, c := range codecs {
		b := bytesBy[c]
		fmt.Printf("codec       %-7s %4d tensors %10.2f MiB (%d bytes)\n", c, countBy[c], float64(b)/(1<<20), b)
		total += b
	}
	fmt.Printf("size        %.2f MiB, %.2fM parameters, %d tensors\n", float64(total)/(1<<20), float64(params)/1e6, len(names))
	if m.Tokenizer != nil {
		fmt.Printf("tokenizer   %s\n", m.Tokenizer.Kind)
	}
	fmt.Printf("source      %s\n", m.Source.Format)
	for _, f := range m.Source.Files {
		fmt.Printf("            %s (%d bytes) %s\n", f.Name, f.Size, f.SHA256)
	}
	if *ctxN > 0 {
		// Weights are the size above on either backend; a session adds this.
		for _, mem := range engine.MemoryFor(&a, *ctxN, engine.Options{KV: *kv}) {
			fmt.Printf("ctx %-7d %-6s KV %s %.2f MiB, state %.2f MiB, activations %.2f MiB: %.2f MiB per session (%d KV bytes per position)\n",
				*ctxN, mem.Backend, *kv, mib(mem.KV), mib(mem.State), mib(mem.Activations), mib(mem.Total()), mem.KV/int64(*ctxN))
		}
	}
	return nil
}

// printGGUFTypes prints a GGUF file's tensor count and bytes per tensor type.
func printGGUFTypes(f *gguf.File) {
	count, bytes := map[gguf.GGMLType]int{}, map[gguf.GGMLType]int64{}
	for _, ti := range f.Tensors {
		count[ti.Type]++
		bytes[ti.Type] += ti.ByteLen()
	}
	types := make([]gguf.GGMLType, 0, len(count))
	for t := range count {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	for _, t := range types {
		fmt.Printf("type        %-7s %4d tensors %10.2f MiB (%d bytes)\n", t, count[t], float64(bytes[t])/(1<<20), bytes[t])
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// loadTokenizer accepts a model (name or path), a tokenizer.json or any
// GGUF: a GGUF's tokenizer comes from its tokenizer.* metadata alone,
// whatever its architecture and tensors (llama.cpp's vocabulary-only
// ggml-vocab-*.gguf files included).
func loadTokenizer(arg string) (*tokenizer.Tokenizer, error) {
	if strings.HasSuffix(arg, ".json") || strings.HasSuffix(arg, ".json.gz") {
		return tokenizer.FromFile(arg)
	}
	path, err := resolvePath(arg)
	if err != nil {
		return nil, err
	}
	if isGGUF(path) {
		return tokenizer.FromGGUFFile(path)
	}
	ctx, cancel := interruptible()
	defer cancel()
	m, err := importer.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer closeModel(m)
	if m.Tokenizer == nil {
		return nil, fmt.Errorf("%s has no tokenizer", arg)
	}
	return tokenizer.Load(m.Tokenizer)
}

func cmdTokenize(args []string) error {
	fs := newFlags("tokenize")
	name := fs.String("m", "", "model, tokenizer.json or vocabulary GGUF")
	special := fs.Bool("special", false, "add the model's special tokens (BOS) as HF add_special_tokens=True")
	parseSpecial := fs.Bool("parse-special", true, "match special tokens written in the text (HF does; llama.cpp's tokenizer tests do not)")
	jsonOut := fs.Bool("json", false, `print {"ids":[...],"tokens":[...]}`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tok, err := loadTokenizer(*name)
	if err != nil {
		return err
	}
	text, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	ids := tok.EncodeWith(string(text), tokenizer.EncodeOptions{AddSpecial: *special, ParseSpecial: *parseSpecial})
	if *jsonOut {
		toks := make([]string, len(ids))
		for i, id := range ids {
			toks[i] = tok.Token(id)
		}
		if ids == nil {
			ids = []int{}
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(map[string]any{"ids": ids, "tokens": toks})
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	fmt.Println(strings.Join(parts, ","))
	return nil
}

func cmdDetokenize(args []string) error {
	fs := newFlags("detokenize")
	name := fs.String("m", "", "model, tokenizer.json or vocabulary GGUF")
	idsFlag := fs.String("ids", "", "token ids, comma separated")
	skip := fs.Bool("skip-special", false, "leave special tokens out")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := parseIDs(*idsFlag)
	if err != nil {
		return err
	}
	tok, err := loadTokenizer(*name)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id < 0 || id >= tok.VocabSize() {
			return fmt.Errorf("token id %d outside the vocabulary (0..%d)", id, tok.VocabSize()-1)
		}
	}
	fmt.Print(tok.Decode(ids, *skip))
	return nil
}

func writeLogits(path string, logits []float32, n, vocab int) error {
	if len(logits) != n*vocab {
		return fmt.Errorf("logits: got %d values, want %d×%d", len(logits), n, vocab)
	}
	data := make([]byte, 4*len(logits))
	for i, v := range logits {
		b := math.Float32bits(v)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	t := &tensor.Tensor{Name: "logits", Codec: tensor.F32, Shape: []int{n, vocab}, Data: data}
	if err := safetensors.Write(f, []*tensor.Tensor{t}); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// isGGUF reports whether path is a regular file that starts with the GGUF
// magic.
func isGGUF(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

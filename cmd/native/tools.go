package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/tokenizer"
)

func init() {
	register("logits", "write the logits of every prompt position to a safetensors file", cmdLogits)
	register("import", "convert an HF directory or GGUF file to CMF (optionally quantized)", cmdImport)
	register("info", "show a model's architecture, codecs and sizes", cmdInfo)
	register("tokenize", "tokenize stdin with a model's tokenizer", cmdTokenize)
	register("detokenize", "turn token ids back into text", cmdDetokenize)
}

func cmdLogits(args []string) error {
	fs := flag.NewFlagSet("logits", flag.ContinueOnError)
	var mf modelFlags
	mf.register(fs)
	idsFlag := fs.String("ids", "", "token ids, comma separated")
	out := fs.String("o", "", "output .safetensors file (tensor \"logits\" f32 [len(ids), vocab])")
	if err := fs.Parse(args); err != nil {
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
	ctx, cancel := interruptible()
	defer cancel()
	r := resolve.Default()
	r.Download = hubDownloader()
	path, err := r.Resolve(ctx, nameOrPath)
	if err != nil {
		return nil, err
	}
	return importer.Open(path)
}

func cmdImport(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	out := fs.String("o", "", "output .cmf file")
	quant := fs.String("quant", "", "requantize weights: f32, f16, bf16, q8_0 or q4_0 (default: keep)")
	// Accept the source before or after the flags.
	var src string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		src, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if src == "" && fs.NArg() > 0 {
		src = fs.Arg(0)
	}
	if src == "" || *out == "" {
		return fmt.Errorf("usage: cortiq import SRC -o OUT.cmf [--quant f32|f16|q8_0|q4_0]")
	}
	var codec tensor.Codec
	keep := *quant == ""
	if !keep {
		c, err := tensor.ParseCodec(*quant)
		if err != nil || (c != tensor.F32 && c != tensor.F16 && c != tensor.BF16 && c != tensor.Q8_0 && c != tensor.Q4_0) {
			return fmt.Errorf("--quant %q: want f32, f16, bf16, q8_0 or q4_0", *quant)
		}
		codec = c
	}
	m, err := openModel(src)
	if err != nil {
		return err
	}
	defer closeModel(m)
	if err := importer.SaveCMF(m, *out, importer.SaveOptions{Quant: codec, Keep: keep}); err != nil {
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
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	name := fs.String("m", "", "model")
	jsonOut := fs.Bool("json", false, "print the normalized architecture as JSON")
	ctxN := fs.Int("ctx", 0, "print the memory one session of this context needs per backend (KV, recurrent state, activations)")
	kv := fs.String("kv", "f32", "KV cache element for --ctx: f32 or f16")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := openModel(*name)
	if err != nil {
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
		bytesBy[t.Codec] += int64(len(t.Data))
		countBy[t.Codec]++
		params += int64(t.Elements())
	}
	var total int64
	for c, b := range bytesBy {
		fmt.Printf("codec       %-5s %4d tensors %10.2f MiB\n", c, countBy[c], float64(b)/(1<<20))
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

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// loadTokenizer accepts a model (name or path), a tokenizer.json or a
// vocabulary-only GGUF.
func loadTokenizer(arg string) (*tokenizer.Tokenizer, error) {
	if strings.HasSuffix(arg, ".json") || strings.HasSuffix(arg, ".json.gz") {
		return tokenizer.FromFile(arg)
	}
	m, err := openModel(arg)
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
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	name := fs.String("m", "", "model, tokenizer.json or vocabulary GGUF")
	special := fs.Bool("special", false, "add the model's special tokens (BOS) as HF add_special_tokens=True")
	jsonOut := fs.Bool("json", false, `print {"ids":[...],"tokens":[...]}`)
	if err := fs.Parse(args); err != nil {
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
	ids := tok.Encode(string(text), *special)
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
	fs := flag.NewFlagSet("detokenize", flag.ContinueOnError)
	name := fs.String("m", "", "model, tokenizer.json or vocabulary GGUF")
	idsFlag := fs.String("ids", "", "token ids, comma separated")
	skip := fs.Bool("skip-special", false, "leave special tokens out")
	if err := fs.Parse(args); err != nil {
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

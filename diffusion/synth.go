package diffusion

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

// SynthShape describes a random-weight Z-Image pipeline (WriteSynthetic):
// for tests, and for timing the real shapes without downloading them.
type SynthShape struct {
	DiT DiTConfig
	VAE VAEConfig
	// Qwen3 text encoder.
	TextHidden, TextLayers, TextHeads, TextKVHeads, TextHeadDim, TextFFN int
	// MaxPositions is the text encoder's max_position_embeddings.
	MaxPositions int
	Seed         uint64
	// BF16 stores matrices as bfloat16 (as the published checkpoints
	// are); norms and biases stay f32.
	BF16 bool
}

// ZImageTurboSynth is Z-Image-Turbo's shape (a 30-layer 3840-wide DiT, the
// Flux VAE, a Qwen3-4B text encoder) with bfloat16 matrices: about 20 GB.
func ZImageTurboSynth() SynthShape {
	shift := float32(0.1159)
	return SynthShape{
		DiT: DiTConfig{PatchSizes: []int{2}, FPatchSizes: []int{1}, InChannels: 16, Dim: 3840, Layers: 30,
			RefinerLayers: 2, Heads: 30, KVHeads: 30, NormEps: 1e-5, QKNorm: true, CapFeatDim: 2560,
			RopeTheta: 256, TScale: 1000, AxesDims: []int{32, 48, 48}, AxesLens: []int{1024, 512, 512}},
		VAE: VAEConfig{InChannels: 3, OutChannels: 3, UpBlockTypes: []string{"UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"},
			BlockOutChannels: []int{128, 256, 512, 512}, LayersPerBlock: 2, ActFn: "silu", LatentChannels: 16,
			NormNumGroups: 32, ScalingFactor: 0.3611, ShiftFactor: &shift, UsePostQuantConv: false, MidBlockAddAttention: true},
		TextHidden: 2560, TextLayers: 36, TextHeads: 32, TextKVHeads: 8, TextHeadDim: 128, TextFFN: 9728,
		MaxPositions: 40960, Seed: 1, BF16: true,
	}
}

// SynthShapes are the shapes WriteSynthetic knows by name.
var SynthShapes = map[string]func() SynthShape{"zimage-tiny": TinySynth, "zimage-turbo": ZImageTurboSynth}

// TinySynth is a small shape that runs in milliseconds: a 64-wide DiT
// (FFN 170), a 4-block VAE (scale 8, so sizes are multiples of 16) and a
// 2-layer text encoder.
func TinySynth() SynthShape {
	shift := float32(0.1159)
	return SynthShape{
		DiT: DiTConfig{PatchSizes: []int{2}, FPatchSizes: []int{1}, InChannels: 16, Dim: 64, Layers: 2,
			RefinerLayers: 1, Heads: 2, KVHeads: 2, NormEps: 1e-5, QKNorm: true, CapFeatDim: 48,
			RopeTheta: 256, TScale: 1000, AxesDims: []int{8, 12, 12}, AxesLens: []int{256, 64, 64}},
		VAE: VAEConfig{InChannels: 3, OutChannels: 3, UpBlockTypes: []string{"UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"},
			BlockOutChannels: []int{8, 16, 24, 24}, LayersPerBlock: 1, ActFn: "silu", LatentChannels: 16,
			NormNumGroups: 4, ScalingFactor: 0.3611, ShiftFactor: &shift, UsePostQuantConv: false, MidBlockAddAttention: true},
		TextHidden: 48, TextLayers: 2, TextHeads: 4, TextKVHeads: 2, TextHeadDim: 16, TextFFN: 96,
		MaxPositions: 128, Seed: 1,
	}
}

// synthVocab is the synthetic tokenizer: the 256 byte-level symbols, then
// these added tokens.
var synthSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"}

// synthTemplate is ChatML with Qwen3's generation prompt.
const synthTemplate = `{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}{%- endif %}`

// WriteSynthetic writes a random-weight pipeline of the given shape in the
// diffusers layout under dir (created; existing files are replaced).
func WriteSynthetic(dir string, s SynthShape) error {
	r := rand.New(rand.NewPCG(s.Seed, 0x73796e7468))
	d, v := s.DiT, s.VAE
	vocab := 256 + len(synthSpecials)
	files := map[string]any{
		"model_index.json": map[string]any{
			"_class_name": "ZImagePipeline", "scheduler": []string{"diffusers", "FlowMatchEulerDiscreteScheduler"},
			"text_encoder": []string{"transformers", "Qwen3Model"}, "tokenizer": []string{"transformers", "PreTrainedTokenizerFast"},
			"transformer": []string{"diffusers", "ZImageTransformer2DModel"}, "vae": []string{"diffusers", "AutoencoderKL"}},
		"scheduler/scheduler_config.json": map[string]any{"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": false},
		"transformer/config.json": map[string]any{"all_patch_size": d.PatchSizes, "all_f_patch_size": d.FPatchSizes,
			"in_channels": d.InChannels, "dim": d.Dim, "n_layers": d.Layers, "n_refiner_layers": d.RefinerLayers,
			"n_heads": d.Heads, "n_kv_heads": d.KVHeads, "norm_eps": d.NormEps, "qk_norm": d.QKNorm,
			"cap_feat_dim": d.CapFeatDim, "rope_theta": d.RopeTheta, "t_scale": d.TScale,
			"axes_dims": d.AxesDims, "axes_lens": d.AxesLens},
		"vae/config.json": map[string]any{"in_channels": v.InChannels, "out_channels": v.OutChannels,
			"up_block_types": v.UpBlockTypes, "block_out_channels": v.BlockOutChannels, "layers_per_block": v.LayersPerBlock,
			"down_block_types": downTypes(len(v.BlockOutChannels)), "act_fn": v.ActFn, "latent_channels": v.LatentChannels, "norm_num_groups": v.NormNumGroups,
			"scaling_factor": v.ScalingFactor, "shift_factor": v.ShiftFactor, "use_post_quant_conv": v.UsePostQuantConv,
			"use_quant_conv": false, "mid_block_add_attention": v.MidBlockAddAttention},
		"text_encoder/config.json": map[string]any{"model_type": "qwen3", "architectures": []string{"Qwen3Model"},
			"vocab_size": vocab, "hidden_size": s.TextHidden, "intermediate_size": s.TextFFN,
			"num_hidden_layers": s.TextLayers, "num_attention_heads": s.TextHeads, "num_key_value_heads": s.TextKVHeads,
			"head_dim": s.TextHeadDim, "max_position_embeddings": s.MaxPositions, "rms_norm_eps": 1e-6,
			"rope_theta": 1e6, "hidden_act": "silu", "tie_word_embeddings": false},
		"tokenizer/tokenizer_config.json": map[string]any{"chat_template": synthTemplate, "eos_token": "<|im_end|>",
			"pad_token": "<|endoftext|>", "model_max_length": 131072},
		"tokenizer/tokenizer.json": synthTokenizer(),
	}
	for name, obj := range files {
		b, err := json.MarshalIndent(obj, "", " ")
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}

	// Weights: a linear [out, in] ~ N(0, 1/in), norms 1 + N(0, 0.01),
	// biases and pad tokens small.
	type w struct {
		name  string
		shape []int
		kind  byte // 'w' weight, 'n' norm, 'b' bias, 'p' pad token
	}
	var dit, vae, te []w
	lin := func(list *[]w, name string, out, in int, bias bool) {
		*list = append(*list, w{name + ".weight", []int{out, in}, 'w'})
		if bias {
			*list = append(*list, w{name + ".bias", []int{out}, 'b'})
		}
	}
	D, hd, ffn, ada := d.Dim, d.Dim/d.Heads, int(float64(d.Dim)/3*8), min(d.Dim, adaLNMaxDim)
	pd := patch * patch * d.InChannels
	lin(&dit, "t_embedder.mlp.0", 1024, tEmbFreqDim, true)
	lin(&dit, "t_embedder.mlp.2", ada, 1024, true)
	lin(&dit, "all_x_embedder.2-1", D, pd, true)
	dit = append(dit, w{"cap_embedder.0.weight", []int{d.CapFeatDim}, 'n'}, w{"x_pad_token", []int{1, D}, 'p'}, w{"cap_pad_token", []int{1, D}, 'p'})
	lin(&dit, "cap_embedder.1", D, d.CapFeatDim, true)
	lin(&dit, "all_final_layer.2-1.adaLN_modulation.1", D, ada, true)
	lin(&dit, "all_final_layer.2-1.linear", pd, D, true)
	block := func(p string, mod bool) {
		for _, n := range []string{"to_q", "to_k", "to_v", "to_out.0"} {
			lin(&dit, p+"attention."+n, D, D, false)
		}
		if d.QKNorm {
			dit = append(dit, w{p + "attention.norm_q.weight", []int{hd}, 'n'}, w{p + "attention.norm_k.weight", []int{hd}, 'n'})
		}
		for _, n := range []string{"attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2"} {
			dit = append(dit, w{p + n + ".weight", []int{D}, 'n'})
		}
		lin(&dit, p+"feed_forward.w1", ffn, D, false)
		lin(&dit, p+"feed_forward.w2", D, ffn, false)
		lin(&dit, p+"feed_forward.w3", ffn, D, false)
		if mod {
			lin(&dit, p+"adaLN_modulation.0", 4*D, ada, true)
		}
	}
	for i := range d.RefinerLayers {
		block(fmt.Sprintf("noise_refiner.%d.", i), true)
		block(fmt.Sprintf("context_refiner.%d.", i), false)
	}
	for i := range d.Layers {
		block(fmt.Sprintf("layers.%d.", i), true)
	}

	conv := func(name string, out, in, k int) {
		vae = append(vae, w{name + ".weight", []int{out, in, k, k}, 'w'}, w{name + ".bias", []int{out}, 'b'})
	}
	gn := func(name string, ch int) {
		vae = append(vae, w{name + ".weight", []int{ch}, 'n'}, w{name + ".bias", []int{ch}, 'b'})
	}
	res := func(p string, in, out int) {
		gn(p+".norm1", in)
		conv(p+".conv1", out, in, 3)
		gn(p+".norm2", out)
		conv(p+".conv2", out, out, 3)
		if in != out {
			conv(p+".conv_shortcut", out, in, 1)
		}
	}
	boc := v.BlockOutChannels
	top := boc[len(boc)-1]
	if v.UsePostQuantConv {
		conv("post_quant_conv", v.LatentChannels, v.LatentChannels, 1)
	}
	conv("decoder.conv_in", top, v.LatentChannels, 3)
	res("decoder.mid_block.resnets.0", top, top)
	if v.MidBlockAddAttention {
		p := "decoder.mid_block.attentions.0."
		gn(p+"group_norm", top)
		for _, n := range []string{"to_q", "to_k", "to_v", "to_out.0"} {
			lin(&vae, p+n, top, top, true)
		}
	}
	res("decoder.mid_block.resnets.1", top, top)
	prev := top
	for i := range boc {
		out := boc[len(boc)-1-i]
		for j := range v.LayersPerBlock + 1 {
			in := out
			if j == 0 {
				in = prev
			}
			res(fmt.Sprintf("decoder.up_blocks.%d.resnets.%d", i, j), in, out)
		}
		if i != len(boc)-1 {
			conv(fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0.conv", i), out, out, 3)
		}
		prev = out
	}
	gn("decoder.conv_norm_out", boc[0])
	conv("decoder.conv_out", v.OutChannels, boc[0], 3)
	// The encoder too (never run here), so that diffusers loads the VAE.
	conv("encoder.conv_in", boc[0], v.InChannels, 3)
	prev = boc[0]
	for i, out := range boc {
		for j := range v.LayersPerBlock {
			in := out
			if j == 0 {
				in = prev
			}
			res(fmt.Sprintf("encoder.down_blocks.%d.resnets.%d", i, j), in, out)
		}
		if i != len(boc)-1 {
			conv(fmt.Sprintf("encoder.down_blocks.%d.downsamplers.0.conv", i), out, out, 3)
		}
		prev = out
	}
	res("encoder.mid_block.resnets.0", top, top)
	if v.MidBlockAddAttention {
		p := "encoder.mid_block.attentions.0."
		gn(p+"group_norm", top)
		for _, n := range []string{"to_q", "to_k", "to_v", "to_out.0"} {
			lin(&vae, p+n, top, top, true)
		}
	}
	res("encoder.mid_block.resnets.1", top, top)
	gn("encoder.conv_norm_out", top)
	conv("encoder.conv_out", 2*v.LatentChannels, top, 3)

	H, q, kv := s.TextHidden, s.TextHeads*s.TextHeadDim, s.TextKVHeads*s.TextHeadDim
	te = append(te, w{"embed_tokens.weight", []int{vocab, H}, 'w'}, w{"norm.weight", []int{H}, 'n'})
	for i := range s.TextLayers {
		p := fmt.Sprintf("layers.%d.", i)
		lin(&te, p+"self_attn.q_proj", q, H, false)
		lin(&te, p+"self_attn.k_proj", kv, H, false)
		lin(&te, p+"self_attn.v_proj", kv, H, false)
		lin(&te, p+"self_attn.o_proj", H, q, false)
		lin(&te, p+"mlp.gate_proj", s.TextFFN, H, false)
		lin(&te, p+"mlp.up_proj", s.TextFFN, H, false)
		lin(&te, p+"mlp.down_proj", H, s.TextFFN, false)
		te = append(te, w{p + "self_attn.q_norm.weight", []int{s.TextHeadDim}, 'n'}, w{p + "self_attn.k_norm.weight", []int{s.TextHeadDim}, 'n'},
			w{p + "input_layernorm.weight", []int{H}, 'n'}, w{p + "post_attention_layernorm.weight", []int{H}, 'n'})
	}

	write := func(path string, list []w) error {
		var ts []*tensor.Tensor
		for _, x := range list {
			n := 1
			for _, e := range x.shape {
				n *= e
			}
			vals := make([]float32, n)
			for i := range vals {
				g := float32(r.NormFloat64())
				switch x.kind {
				case 'w':
					vals[i] = g / float32(math.Sqrt(float64(n/x.shape[0])))
				case 'n':
					vals[i] = 1 + 0.1*g
				case 'b':
					vals[i] = 0.05 * g
				default:
					vals[i] = 0.5 * g
				}
			}
			codec := tensor.F32
			if s.BF16 && x.kind == 'w' {
				codec = tensor.BF16
			}
			nb, _ := tensor.ByteLen(codec, x.shape)
			b := make([]byte, nb)
			if err := tensor.Quantize(b, codec, vals); err != nil {
				return err
			}
			ts = append(ts, &tensor.Tensor{Name: x.name, Codec: codec, Shape: x.shape, Data: b})
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := safetensors.Write(f, ts); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write(filepath.Join(dir, "transformer", "diffusion_pytorch_model.safetensors"), dit); err != nil {
		return err
	}
	if err := write(filepath.Join(dir, "vae", "diffusion_pytorch_model.safetensors"), vae); err != nil {
		return err
	}
	return write(filepath.Join(dir, "text_encoder", "model.safetensors"), te)
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// synthTokenizer is a byte-level BPE without merges: one token per byte
// (GPT-2's byte-to-symbol map), plus the special tokens.
func synthTokenizer() map[string]any {
	var bs []int
	for b := '!'; b <= '~'; b++ {
		bs = append(bs, int(b))
	}
	for b := '¡'; b <= '¬'; b++ {
		bs = append(bs, int(b))
	}
	for b := '®'; b <= 'ÿ'; b++ {
		bs = append(bs, int(b))
	}
	sym := map[int]rune{}
	for _, b := range bs {
		sym[b] = rune(b)
	}
	n := 0
	for b := range 256 {
		if _, ok := sym[b]; !ok {
			sym[b] = rune(256 + n)
			n++
		}
	}
	keys := make([]int, 0, 256)
	for b := range sym {
		keys = append(keys, b)
	}
	sort.Ints(keys)
	vocab := map[string]int{}
	for _, b := range keys {
		vocab[string(sym[b])] = b
	}
	var added []map[string]any
	for i, t := range synthSpecials {
		vocab[t] = 256 + i
		added = append(added, map[string]any{"id": 256 + i, "content": t, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": i < 3})
	}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []string{}},
	}
}

func downTypes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "DownEncoderBlock2D"
	}
	return out
}

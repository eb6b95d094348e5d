#!/usr/bin/env python3
"""Reference fixtures for cortiq's text-to-image pipeline (issue 19): a tiny random Z-Image.

Run (GPU machine; no internet; torch + transformers installed; diffusers' source on PYTHONPATH):

    PYTHONPATH=/path/to/diffusers/src python3 scripts/gen_image_reference.py OUTDIR

Everything runs on the CPU in float32 with eager attention and fixed seeds (CUDA is hidden).
It writes:

    OUTDIR/zimage-tiny/            the pipeline in the diffusers layout (pipe.save_pretrained):
        model_index.json, scheduler/, text_encoder/ (Qwen3), tokenizer/ (tokenizer.json + chat
        template, built offline with `tokenizers`), transformer/ (ZImageTransformer2DModel),
        vae/ (AutoencoderKL, 16 latent channels)
    OUTDIR/ref_text_encoder.safetensors   prompt ids and hidden states (hidden_states[-2] = what
                                          ZImagePipeline feeds the DiT), for a prompt and a negative
    OUTDIR/ref_transformer.safetensors    one DiT forward on given latents / timestep / caption features
    OUTDIR/ref_scheduler.safetensors      sigmas/timesteps for a few schedules and one Euler step
    OUTDIR/ref_vae.safetensors            VAE decode of given latents (raw, before postprocessing)
    OUTDIR/ref_pipeline.safetensors       the whole pipeline on given initial latents, with and
                                          without CFG: per-step latents and the float image
                                          (output_type="pt": [0,1], before PNG rounding)
    OUTDIR/meta.json, OUTDIR/log.txt

Each section is independent: a failure is logged with its traceback and the rest goes on.
Strings (rendered prompts) are stored in the safetensors metadata.
"""
import os
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # force the CPU before torch is imported
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import json
import math
import platform
import traceback

OUT = sys.argv[1] if len(sys.argv) > 1 else "zimage-ref"
os.makedirs(OUT, exist_ok=True)
LOG = []


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.append(s)


def flush_log():
    with open(os.path.join(OUT, "log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")


import torch
import numpy as np

torch.set_num_threads(1)
torch.set_default_dtype(torch.float32)
try:
    torch.use_deterministic_algorithms(True, warn_only=True)
except Exception as e:  # pragma: no cover
    log("deterministic algorithms not set:", e)

from safetensors.torch import save_file

VERSIONS = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
import transformers

VERSIONS["transformers"] = transformers.__version__
try:
    import tokenizers

    VERSIONS["tokenizers"] = tokenizers.__version__
except Exception:
    tokenizers = None
import diffusers

VERSIONS["diffusers"] = getattr(diffusers, "__version__", "?")
VERSIONS["diffusers_path"] = os.path.dirname(diffusers.__file__)
log("VERSIONS", json.dumps(VERSIONS))

from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel

WRITTEN = []
META = {"versions": VERSIONS}


def save(name, tensors, metadata=None):
    path = os.path.join(OUT, name)
    t = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    save_file(t, path, metadata={k: str(v) for k, v in (metadata or {}).items()})
    size = os.path.getsize(path)
    WRITTEN.append((name, size))
    log(f"WROTE {name} ({size} bytes): " + ", ".join(f"{k}{list(v.shape)}:{str(v.dtype).replace('torch.', '')}" for k, v in t.items()))


def section(name):
    def deco(fn):
        def run(*a, **kw):
            log(f"== {name}")
            try:
                r = fn(*a, **kw)
                log(f"OK {name}")
                return r
            except Exception:
                log(f"FAIL {name}\n{traceback.format_exc()}")
                flush_log()
                return None

        return run

    return deco


# ----------------------------------------------------------------------------------------------
# Sizes. Odd where the architecture allows: FFN width int(64/3*8) = 170, 24 image tokens (padded
# to 32), captions of odd length (padded to a multiple of 32), a non-square image.
# ----------------------------------------------------------------------------------------------
SEED = 1234
WIDTH, HEIGHT = 96, 64  # image; the VAE has 4 blocks (scale 8) so latents are 8 x 12, DiT tokens 4 x 6
STEPS = 5
PROMPT = "a red fox jumping over the lazy dog, watercolor"
NEGATIVE = "blurry, low quality"
GUIDANCE = 2.5
MAX_SEQ = 512  # ZImagePipeline's default max_sequence_length

TE_CFG = dict(
    vocab_size=512,
    hidden_size=48,
    intermediate_size=136,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=1024,
    initializer_range=0.2,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
DIT_CFG = dict(
    all_patch_size=(2,),
    all_f_patch_size=(1,),
    in_channels=16,
    dim=64,
    n_layers=2,
    n_refiner_layers=1,
    n_heads=2,
    n_kv_heads=2,
    norm_eps=1e-5,
    qk_norm=True,
    cap_feat_dim=TE_CFG["hidden_size"],
    rope_theta=256.0,
    t_scale=1000.0,
    axes_dims=[8, 12, 12],
    axes_lens=[256, 64, 64],
)
VAE_CFG = dict(
    in_channels=3,
    out_channels=3,
    down_block_types=["DownEncoderBlock2D"] * 4,
    up_block_types=["UpDecoderBlock2D"] * 4,
    block_out_channels=[8, 16, 24, 24],
    layers_per_block=1,
    act_fn="silu",
    latent_channels=16,
    norm_num_groups=4,
    sample_size=64,
    scaling_factor=0.3611,
    shift_factor=0.1159,
    use_quant_conv=False,
    use_post_quant_conv=True,  # Flux's VAE has none; keep it here so the 1x1 conv is exercised
    mid_block_add_attention=True,
)
SCHED_CFG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)

# Qwen3's chat template (the text shipped in Qwen3 tokenizer_config.json).
QWEN3_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_NON_SPECIAL = ["<think>", "</think>"]
CORPUS = [
    PROMPT,
    NEGATIVE,
    "a photo of a cat sitting on a windowsill in the morning light",
    "an oil painting of mountains and a lake at sunset, highly detailed",
    "user assistant system the quick brown fox jumps over the lazy dog",
    "a watercolor of a red fox in the snow, soft colors, 4k",
    "一幅水彩画 with unicode: café, naïve, 東京",
]


def rand_init(module, seed, std_scale=1.0):
    """Deterministic random weights: every parameter, including norms and pad tokens, non-trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if "pad_token" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif p.ndim >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) * (std_scale / math.sqrt(fan_in)))
            elif name.endswith("weight"):  # norms
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:  # biases
                p.copy_(0.05 * torch.randn(p.shape, generator=g))


# ----------------------------------------------------------------------------------------------
# 1. components
# ----------------------------------------------------------------------------------------------
@section("tokenizer")
def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers, normalizers, Regex
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # transformers 5 may name it TokenizersBackend
        from transformers import TokenizersBackend as PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    # Qwen2's pre-tokenizer: its split regex, then byte-level without a regex.
    qwen_re = (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(qwen_re), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in ADDED_NON_SPECIAL])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=131072,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = QWEN3_TEMPLATE
    log("tokenizer vocab", len(fast))
    assert len(fast) <= TE_CFG["vocab_size"], "tokenizer larger than the text encoder's vocabulary"
    return fast


@section("text encoder")
def build_text_encoder():
    from transformers import AutoConfig, AutoModel

    cfg = AutoConfig.for_model("qwen3", **TE_CFG)
    torch.manual_seed(SEED)
    try:
        m = AutoModel.from_config(cfg, attn_implementation="eager")
    except TypeError:
        cfg._attn_implementation = "eager"
        m = AutoModel.from_config(cfg)
    m = m.float().eval()
    g = torch.Generator().manual_seed(SEED + 100)
    with torch.no_grad():  # norms away from 1 so a loader that drops one is caught
        for name, p in sorted(m.named_parameters(), key=lambda kv: kv[0]):
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    log("text encoder class", type(m).__name__)
    return m


@section("transformer")
def build_transformer():
    torch.manual_seed(SEED + 1)
    m = ZImageTransformer2DModel(**DIT_CFG).float().eval()
    rand_init(m, SEED + 1)
    return m


@section("vae")
def build_vae():
    torch.manual_seed(SEED + 2)
    m = AutoencoderKL(**VAE_CFG).float().eval()
    rand_init(m, SEED + 2)
    return m


def build_scheduler():
    return FlowMatchEulerDiscreteScheduler(**SCHED_CFG)


tokenizer = build_tokenizer()
text_encoder = build_text_encoder()
transformer = build_transformer()
vae = build_vae()
scheduler = build_scheduler()

MODEL_DIR = os.path.join(OUT, "zimage-tiny")
pipe = None


@section("save pipeline")
def save_pipeline():
    p = ZImagePipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)
    p.save_pretrained(MODEL_DIR, safe_serialization=True)
    for root, _, files in sorted(os.walk(MODEL_DIR)):
        for f in sorted(files):
            path = os.path.join(root, f)
            log("  model file", os.path.relpath(path, OUT), os.path.getsize(path))
    return p


@section("reload pipeline from disk")
def reload_pipeline():
    try:
        p = ZImagePipeline.from_pretrained(MODEL_DIR, torch_dtype=torch.float32)
    except TypeError:
        p = ZImagePipeline.from_pretrained(MODEL_DIR)
    p = p.to("cpu")
    try:
        p.text_encoder.config._attn_implementation = "eager"
        p.text_encoder.set_attn_implementation("eager")
    except Exception as e:
        log("set eager on reloaded text encoder:", e)
    for name in ("text_encoder", "transformer", "vae"):
        getattr(p, name).float().eval()
    return p


mem_pipe = save_pipeline()
disk_pipe = reload_pipeline() if mem_pipe is not None else None
pipe = disk_pipe if disk_pipe is not None else mem_pipe
if pipe is None and all(x is not None for x in (tokenizer, text_encoder, transformer, vae)):
    pipe = ZImagePipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)
log("pipeline from", "disk" if pipe is not None and pipe is not mem_pipe else "memory")
try:
    if pipe is not None:
        pipe.set_progress_bar_config(disable=True)
except Exception:
    pass
flush_log()


# ----------------------------------------------------------------------------------------------
# 2. references
# ----------------------------------------------------------------------------------------------
def render(tok, text):
    return tok.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True, enable_thinking=True
    )


@section("ref text encoder")
@torch.no_grad()
def ref_text_encoder():
    tok, te = pipe.tokenizer, pipe.text_encoder
    tensors, meta = {}, {}
    for key, text in (("prompt", PROMPT), ("negative", NEGATIVE), ("empty", "")):
        rendered = render(tok, text)
        enc = tok([rendered], padding="max_length", max_length=MAX_SEQ, truncation=True, return_tensors="pt")
        ids, mask = enc.input_ids, enc.attention_mask.bool()
        n = int(mask.sum())
        out = te(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        hs = torch.stack([h[0, :n] for h in out.hidden_states])  # [L+1, n, hidden]
        # what the pipeline itself takes
        embeds = pipe._encode_prompt(prompt=[text], device=torch.device("cpu"), max_sequence_length=MAX_SEQ)[0]
        tensors[f"{key}_input_ids"] = ids[0, :n].to(torch.int64)
        tensors[f"{key}_hidden_states"] = hs.float()
        tensors[f"{key}_embeds"] = embeds.float()  # == hidden_states[-2]
        tensors[f"{key}_plain_ids"] = torch.tensor(tok(rendered, add_special_tokens=True).input_ids, dtype=torch.int64)
        meta[f"{key}_text"] = text
        meta[f"{key}_rendered"] = rendered
        d = (embeds - hs[-2]).abs().max().item()
        log(f"  {key}: {n} tokens, rendered {rendered!r}, |embeds - hs[-2]| = {d}")
    save("ref_text_encoder.safetensors", tensors, meta)
    META["text_encoder"] = meta


@section("ref transformer")
@torch.no_grad()
def ref_transformer():
    g = torch.Generator().manual_seed(SEED + 10)
    lh, lw = HEIGHT // 8, WIDTH // 8
    x = torch.randn(16, 1, lh, lw, generator=g)
    cap = torch.randn(37, DIT_CFG["cap_feat_dim"], generator=g)  # 37 rows: padded to 64
    cap2 = torch.randn(9, DIT_CFG["cap_feat_dim"], generator=g)  # 9 rows: padded to 32
    t = torch.tensor([0.3125])
    out = pipe.transformer([x], t, [cap], return_dict=False)[0][0]
    # a batch of two with captions of different lengths (the CFG batch): each item must equal its solo run
    tb = torch.tensor([0.3125, 0.8])
    outb = pipe.transformer([x, x * 0.5], tb, [cap, cap2], return_dict=False)[0]
    solo2 = pipe.transformer([x * 0.5], tb[1:], [cap2], return_dict=False)[0][0]
    log("  batch item 0 vs solo", (outb[0] - out).abs().max().item(), "item 1 vs solo", (outb[1] - solo2).abs().max().item())
    # the timestep embedding alone (adaLN input)
    temb = pipe.transformer.t_embedder(t * DIT_CFG["t_scale"])
    save(
        "ref_transformer.safetensors",
        {
            "x": x,
            "t": t,
            "cap_feats": cap,
            "out": out.float(),
            "t_emb": temb.float(),
            "x2": x * 0.5,
            "t2": tb[1:],
            "cap_feats2": cap2,
            "out2": solo2.float(),
        },
    )


@section("ref scheduler")
def ref_scheduler():
    from diffusers.pipelines.z_image.pipeline_z_image import calculate_shift, get_default_z_image_sigmas, retrieve_timesteps

    tensors = {}
    lh, lw = HEIGHT // 8, WIDTH // 8
    seq = (lh // 2) * (lw // 2)
    cases = [
        ("shift3_n5", SCHED_CFG, 5),
        ("shift3_n8", SCHED_CFG, 8),
        ("shift1_n4", dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=False), 4),
        ("dynamic_n6", dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                             base_image_seq_len=256, max_image_seq_len=4096), 6),
    ]
    for name, cfg, n in cases:
        s = FlowMatchEulerDiscreteScheduler(**cfg)
        mu = calculate_shift(seq, s.config.get("base_image_seq_len", 256), s.config.get("max_image_seq_len", 4096),
                             s.config.get("base_shift", 0.5), s.config.get("max_shift", 1.15))
        ts, _ = retrieve_timesteps(s, n, "cpu", sigmas=get_default_z_image_sigmas(n), mu=mu)
        tensors[f"{name}_sigmas"] = s.sigmas.float()
        tensors[f"{name}_timesteps"] = ts.float()
        tensors[f"{name}_mu"] = torch.tensor([mu], dtype=torch.float64)
        log(f"  {name}: mu={mu} sigmas={s.sigmas.tolist()}")
    # one step (the pipeline's second step) on given data
    g = torch.Generator().manual_seed(SEED + 20)
    sample = torch.randn(1, 16, lh, lw, generator=g)
    model_out = torch.randn(1, 16, lh, lw, generator=g)
    s = FlowMatchEulerDiscreteScheduler(**SCHED_CFG)
    ts, _ = retrieve_timesteps(s, 5, "cpu", sigmas=get_default_z_image_sigmas(5), mu=0.5)
    s.set_begin_index(0)
    s.step(model_out, ts[0], sample, return_dict=False)  # advance to index 1
    prev = s.step(model_out, ts[1], sample, return_dict=False)[0]
    tensors.update({"step_sample": sample, "step_model_output": model_out, "step_index": torch.tensor([1], dtype=torch.int64),
                    "step_prev_sample": prev})
    save("ref_scheduler.safetensors", tensors, {"seq_len": seq})


@section("ref vae")
@torch.no_grad()
def ref_vae():
    g = torch.Generator().manual_seed(SEED + 30)
    lh, lw = HEIGHT // 8, WIDTH // 8
    z = torch.randn(1, 16, lh, lw, generator=g)
    dec = pipe.vae.decode(z, return_dict=False)[0]
    img = pipe.image_processor.postprocess(dec, output_type="pt")
    save("ref_vae.safetensors", {"latents": z, "decoded": dec.float(), "image": img.float()},
         {"scaling_factor": VAE_CFG["scaling_factor"], "shift_factor": VAE_CFG["shift_factor"]})


@section("ref pipeline")
@torch.no_grad()
def ref_pipeline():
    g = torch.Generator().manual_seed(SEED + 40)
    lh, lw = HEIGHT // 8, WIDTH // 8
    latents = torch.randn(1, 16, lh, lw, generator=g)
    tensors = {"latents": latents}
    meta = {"prompt": PROMPT, "negative": NEGATIVE, "width": WIDTH, "height": HEIGHT, "steps": STEPS, "guidance": GUIDANCE}
    runs = [("nocfg", dict(guidance_scale=0.0)),
            ("cfg", dict(guidance_scale=GUIDANCE, negative_prompt=NEGATIVE)),
            ("cfg_empty", dict(guidance_scale=GUIDANCE))]  # negative defaults to ""
    for key, kw in runs:
        steps = []

        def cb(p, i, t, ckw):
            steps.append(ckw["latents"].detach().clone())
            return {}

        try:
            img = pipe(prompt=PROMPT, height=HEIGHT, width=WIDTH, num_inference_steps=STEPS, latents=latents.clone(),
                       output_type="pt", callback_on_step_end=cb, callback_on_step_end_tensor_inputs=["latents"],
                       return_dict=False, **kw)[0]
            tensors[f"{key}_image"] = img[0].float()  # [3, H, W] in [0, 1]
            tensors[f"{key}_step_latents"] = torch.cat(steps).float()  # [STEPS, 16, lh, lw]
            log(f"  {key}: image {list(img.shape)} min {img.min().item():.4f} max {img.max().item():.4f} mean {img.mean().item():.4f}")
        except Exception:
            log(f"FAIL pipeline run {key}\n{traceback.format_exc()}")
    tensors["timesteps"] = pipe.scheduler.timesteps.float()
    save("ref_pipeline.safetensors", tensors, meta)
    META["pipeline"] = meta


if pipe is not None:
    ref_text_encoder()
    ref_transformer()
    ref_scheduler()
    ref_vae()
    ref_pipeline()
else:
    log("FAIL no pipeline: references skipped")

META["written"] = WRITTEN
META["configs"] = {"text_encoder": TE_CFG, "transformer": DIT_CFG, "vae": VAE_CFG, "scheduler": SCHED_CFG}
with open(os.path.join(OUT, "meta.json"), "w") as f:
    json.dump(META, f, indent=1, default=str)
total = 0
for root, _, files in os.walk(OUT):
    for f in files:
        total += os.path.getsize(os.path.join(root, f))
log(f"TOTAL {total} bytes under {OUT}")
flush_log()

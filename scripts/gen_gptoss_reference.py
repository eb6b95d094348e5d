#!/usr/bin/env python3
"""Tiny random gpt-oss fixtures with HF-transformers reference outputs.

Run:  python3 gen_gptoss_reference.py OUT_DIR
Same conventions as ../shared/scripts/gen_reference.py (CPU, float32, eager attention, seed 1234,
prompt seed 4321, 24 prompt tokens, 24 greedy tokens): OUT_DIR/tiny/<name>/{config.json,
model.safetensors, reference.safetensors, meta.json}. The repository keeps its output in
fixtures/testdata/tiny (fixtures.Local, fixtures.InRepo), made with transformers 5.17, torch 2.11. Each variant is independent: a failure is
logged with its traceback and the rest goes on.
"""
import sys, os, json, time, traceback, platform

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)

import torch
import transformers
from safetensors.torch import save_file, load_file
from transformers import AutoConfig, AutoModelForCausalLM

torch.set_num_threads(1)
try:
    torch.use_deterministic_algorithms(True, warn_only=True)
except Exception as e:
    print("deterministic algorithms not set:", e)

SEED, PROMPT_SEED, N_PROMPT, N_NEW, VOCAB = 1234, 4321, 24, 24, 320
VERSIONS = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}
print("VERSIONS", VERSIONS, flush=True)

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=32, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
              initializer_range=0.2, bos_token_id=1, eos_token_id=2, pad_token_id=0,
              num_local_experts=32, num_experts_per_tok=4, sliding_window=8, tie_word_embeddings=False,
              attention_bias=True, rms_norm_eps=1e-5,
              layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"])
YARN = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False, "original_max_position_embeddings": 64}
VARIANTS = [
    ("gpt_oss", {}, "4 layers alternating sliding(8)/full, 32 experts top-4, YaRN factor 4 over 64, sinks, biases, clamped SwiGLU"),
    ("gpt_oss_e8", dict(num_local_experts=8, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"]),
     "2 layers, 8 experts top-4"),
]


def make_config(over):
    kw = dict(COMMON)
    kw.update(over)
    for rope in ({"rope_parameters": dict(YARN)},
                 {"rope_theta": YARN["rope_theta"], "rope_scaling": {k: v for k, v in YARN.items() if k != "rope_theta"}}):
        try:
            cfg = AutoConfig.for_model("gpt_oss", **kw, **rope)
            return cfg
        except Exception as e:
            print("config attempt failed:", e, flush=True)
    raise RuntimeError("no config form accepted")


@torch.no_grad()
def greedy_nocache(model, ids, n):
    cur, steps = ids.clone(), []
    for _ in range(n):
        lg = model(cur, use_cache=False).logits[0, -1].float()
        steps.append(lg)
        cur = torch.cat([cur, lg.argmax().view(1, 1)], dim=1)
    return cur[0, ids.shape[1]:].clone(), torch.stack(steps)


@torch.no_grad()
def greedy_generate(model, ids, n):
    gc = model.generation_config
    gc.eos_token_id, gc.pad_token_id, gc.do_sample = None, 0, False
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False, num_beams=1,
                         output_logits=True, return_dict_in_generate=True, use_cache=True)
    return out.sequences[0, ids.shape[1]:].clone(), torch.stack([x[0].float() for x in out.logits])


g = torch.Generator().manual_seed(PROMPT_SEED)
ids = torch.randint(3, VOCAB, (1, N_PROMPT), generator=g, dtype=torch.int64)
summary = {}
for name, over, note in VARIANTS:
    t0 = time.time()
    d = os.path.join(OUT, "tiny", name)
    try:
        cfg = make_config(over)
        torch.manual_seed(SEED)
        try:
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        except TypeError:
            cfg._attn_implementation = "eager"
            model = AutoModelForCausalLM.from_config(cfg)
        model = model.float().eval()
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(d, safe_serialization=True)
        del model
        try:
            model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).eval()
        except TypeError:
            model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", torch_dtype=torch.float32).eval()
        with torch.no_grad():
            out = model(ids, use_cache=False, output_hidden_states=True)
        logits = out.logits[0].float().contiguous()
        hidden = torch.stack([h[0].float() for h in out.hidden_states]).contiguous()
        nc_ids, nc_logits = greedy_nocache(model, ids, N_NEW)
        try:
            gen_ids, gen_logits = greedy_generate(model, ids, N_NEW)
        except Exception as e:
            print("generate failed, using no-cache greedy:", e, flush=True)
            gen_ids, gen_logits = nc_ids, nc_logits
        save_file({"input_ids": ids[0].contiguous(), "logits": logits, "hidden_states": hidden,
                   "generated_ids": gen_ids.contiguous(), "step_logits_generate": gen_logits.contiguous(),
                   "generated_ids_nocache": nc_ids.contiguous(), "step_logits_nocache": nc_logits.contiguous()},
                  os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
        top2 = nc_logits.topk(2, dim=-1).values
        sd = {}
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".safetensors") and fn != "reference.safetensors":
                sd.update({k: [list(v.shape), str(v.dtype)] for k, v in load_file(os.path.join(d, fn)).items()})
        meta = {"arch": name, "model_type": "gpt_oss", "note": note, "versions": VERSIONS, "seed": SEED,
                "prompt_seed": PROMPT_SEED, "config": model.config.to_dict(), "class": type(model).__name__,
                "checks": {"generate_equals_nocache": bool(torch.equal(gen_ids, nc_ids)),
                           "min_top2_margin_nocache": float((top2[:, 0] - top2[:, 1]).min()),
                           "prompt_logits_std": float(logits.std())},
                "saved_tensors": sd, "seconds": round(time.time() - t0, 2)}
        json.dump(meta, open(os.path.join(d, "meta.json"), "w"), indent=1, default=str)
        summary[name] = "PASS"
        print(f"PASS {name} gen={gen_ids.tolist()} nocache_equal={meta['checks']['generate_equals_nocache']} "
              f"margin={meta['checks']['min_top2_margin_nocache']:.3e}", flush=True)
    except Exception as e:
        summary[name] = f"FAIL {type(e).__name__}: {e}"
        print(f"FAIL {name}:", traceback.format_exc(), flush=True)
json.dump(summary, open(os.path.join(OUT, "gptoss_summary.json"), "w"), indent=1)

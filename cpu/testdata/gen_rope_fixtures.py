#!/usr/bin/env python3
"""Tiny Llama checkpoints with scaled RoPE (llama3, yarn, linear) and their
transformers reference logits, for cpu/rope_test.go.

Run where torch and transformers are installed:  python3 gen_rope_fixtures.py OUT_DIR
Same recipe as shared/scripts/gen_reference.py (float32, eager, CPU, seeded).
"""
import json, os, sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

OUT = sys.argv[1]
torch.set_num_threads(1)
COMMON = dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
              initializer_range=0.2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
VARIANTS = {
    "llama3": dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                   high_freq_factor=4.0, original_max_position_embeddings=16),
    "yarn": dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=16),
    "linear": dict(rope_type="linear", rope_theta=10000.0, factor=2.0),
}
g = torch.Generator().manual_seed(4321)
ids = torch.randint(3, 320, (1, 24), generator=g, dtype=torch.int64)
for name, rp in VARIANTS.items():
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    try:
        cfg = AutoConfig.for_model("llama", rope_parameters=rp, **COMMON)
    except TypeError:
        cfg = AutoConfig.for_model("llama", rope_scaling=rp, rope_theta=rp["rope_theta"], **COMMON)
    torch.manual_seed(1234)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
    model.save_pretrained(d)
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits[0].float().contiguous()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False,
                             num_beams=1, output_logits=True, return_dict_in_generate=True, use_cache=True,
                             eos_token_id=None, pad_token_id=0)
    gen = out.sequences[0, ids.shape[1]:].contiguous()
    step = torch.stack([x[0].float() for x in out.logits]).contiguous()
    save_file({"input_ids": ids[0].contiguous(), "logits": logits, "generated_ids": gen,
               "step_logits_generate": step}, os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
    for f in ("generation_config.json",):
        p = os.path.join(d, f)
        if os.path.exists(p):
            os.remove(p)
    print(name, "ok", transformers.__version__, json.load(open(os.path.join(d, "config.json"))).get("rope_parameters"))

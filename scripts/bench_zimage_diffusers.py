#!/usr/bin/env python3
"""Times diffusers' ZImagePipeline in bfloat16 on the GPU for scripts/bench-zimage-h200.sh.

Writes the initial noise it uses (tensor "latents", float32) to --noise so that cortiq imagine
--latents starts from the same noise, then reports seconds per image (after one warm-up run),
seconds per step and peak GPU memory.
"""
import argparse, os, time, json

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from safetensors.torch import save_file
from diffusers import ZImagePipeline

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--size", type=int, default=1024)
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--prompt", default="a watercolor of a red fox in the snow")
ap.add_argument("--noise", required=True)
a = ap.parse_args()

t0 = time.time()
pipe = ZImagePipeline.from_pretrained(a.model, torch_dtype=torch.bfloat16).to("cuda")
pipe.set_progress_bar_config(disable=True)
load_s = time.time() - t0
lat_side = 2 * (a.size // 16)
g = torch.Generator().manual_seed(0)
latents = torch.randn(1, 16, lat_side, lat_side, generator=g)
save_file({"latents": latents.contiguous()}, a.noise)

def run():
    torch.cuda.synchronize()
    t = time.time()
    pipe(prompt=a.prompt, height=a.size, width=a.size, num_inference_steps=a.steps, guidance_scale=0.0,
         latents=latents.clone().to("cuda"), output_type="pt")
    torch.cuda.synchronize()
    return time.time() - t

run()  # warm-up
torch.cuda.reset_peak_memory_stats()
secs = min(run(), run())
print(json.dumps({"impl": "diffusers-bf16", "torch": torch.__version__, "size": a.size, "steps": a.steps,
                  "load_s": round(load_s, 2), "s_per_image": round(secs, 3), "s_per_step": round(secs / a.steps, 4),
                  "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}))

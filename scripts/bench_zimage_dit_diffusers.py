#!/usr/bin/env python3
"""Times diffusers' ZImageTransformer2DModel and the Flux AutoencoderKL decoder alone in bfloat16
on the GPU (random weights of Z-Image-Turbo's shapes, built on the device: no model on disk) for
scripts/bench-zimage-h200.sh, beside cortiq's BenchmarkDiTStep and BenchmarkVAEDecode: one
transformer evaluation (one denoising step without guidance) and one decode per size, best of
--reps after a warm-up, and peak GPU memory.
"""
import argparse, json, time

import torch
from diffusers import AutoencoderKL, ZImageTransformer2DModel

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="512,1024")
ap.add_argument("--cap", type=int, default=32, help="caption rows")
ap.add_argument("--reps", type=int, default=5)
a = ap.parse_args()

cfg = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=3840, n_layers=30,
           n_refiner_layers=2, n_heads=30, n_kv_heads=30, norm_eps=1e-5, qk_norm=True, cap_feat_dim=2560,
           rope_theta=256.0, t_scale=1000.0, axes_dims=[32, 48, 48], axes_lens=[1024, 512, 512])
with torch.device("cuda"):
    m = ZImageTransformer2DModel(**cfg)
m = m.to(torch.bfloat16).eval()
torch.cuda.empty_cache()
g = torch.Generator(device="cuda").manual_seed(0)
for size in [int(s) for s in a.sizes.split(",")]:
    lat = size // 8
    x = torch.randn(16, 1, lat, lat, generator=g, device="cuda", dtype=torch.bfloat16)
    cap = torch.randn(a.cap, 2560, generator=g, device="cuda", dtype=torch.bfloat16)
    t = torch.tensor([0.5], device="cuda", dtype=torch.bfloat16)

    def step():
        torch.cuda.synchronize()
        t0 = time.time()
        with torch.no_grad():
            m([x], t, [cap], return_dict=False)
        torch.cuda.synchronize()
        return time.time() - t0

    step()  # warm-up
    torch.cuda.reset_peak_memory_stats()
    secs = min(step() for _ in range(a.reps))
    print(json.dumps({"impl": "diffusers-bf16-transformer", "torch": torch.__version__, "size": size,
                      "image_rows": (lat // 2) ** 2, "caption_rows": a.cap, "s_per_step": round(secs, 4),
                      "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}), flush=True)

del m
torch.cuda.empty_cache()
with torch.device("cuda"):
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, block_out_channels=(128, 256, 512, 512),
                        layers_per_block=2, act_fn="silu", latent_channels=16, norm_num_groups=32,
                        scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False,
                        use_post_quant_conv=False, mid_block_add_attention=True)
vae = vae.to(torch.bfloat16).eval()
for size in [int(s) for s in a.sizes.split(",")]:
    z = torch.randn(1, 16, size // 8, size // 8, generator=g, device="cuda", dtype=torch.bfloat16)

    def dec():
        torch.cuda.synchronize()
        t0 = time.time()
        with torch.no_grad():
            vae.decode(z, return_dict=False)
        torch.cuda.synchronize()
        return time.time() - t0

    dec()
    torch.cuda.reset_peak_memory_stats()
    secs = min(dec() for _ in range(a.reps))
    print(json.dumps({"impl": "diffusers-bf16-vae-decode", "size": size, "s": round(secs, 4),
                      "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}), flush=True)

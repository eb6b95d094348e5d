// Package cudadev runs the image pipeline's transformer on an NVIDIA GPU
// through the CUDA backend's driver binding (cuda/driver) and its kernel
// module (cuda/kernels, dit.cu): DiTRunner is a diffusion.DiTDevice whose
// every linear layer is a tensor-core GEMM (mma.sync m16n8k16 f16 → f32),
// whose joint attention is a flash-attention kernel, and whose whole step
// is one CUDA graph.
//
// It sits above diffusion and cuda/driver as diffusion/device sits above
// diffusion and gpu: neither the cuda backend nor diffusion depends on
// it. Front ends open a driver.Device (driver.Open), build a runner here
// and hand it to a diffusion.Pipeline; where there is no CUDA driver,
// driver.Open's error says so and the front end stays on its other path.
//
// Precision: the residual stream and every accumulation are f32; what
// enters a product (normed activations, q, k, v, attention probabilities,
// the feed-forward's hidden rows, the weights) is f16. A float32 model of
// exactly that rounding (TestPrecisionModel, no GPU needed) measures what
// it costs against diffusers on the tiny reference model; bf16 costs
// about eight times more.
package cudadev

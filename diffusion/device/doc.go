// Package device runs the image pipeline's heavy parts on a GPU: the
// Z-Image transformer's blocks (DiTRunner, a diffusion.DiTDevice) and the
// AutoencoderKL decoder (VAEDecoder, a diffusion.Decoder), through the
// WebGPU runtime (package gpu) and the image kernels of package shaders.
//
// It sits above both diffusion and gpu, so that neither the model backend
// (package webgpu) nor diffusion depends on the other: front ends (cortiq
// imagine, the server, the tab) open a gpu.Device, build the runners here
// and hand them to a diffusion.Pipeline. Results equal the CPU reference
// within the device tolerance, or an error; never partial images.
package device

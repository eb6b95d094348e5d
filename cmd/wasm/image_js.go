//go:build js

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall/js"
	"time"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/diffusion/device"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/webgpu"
)

// imageState is a loaded text-to-image pipeline (a pipeline CMF file): the
// embedders (and the text encoder's embeddings) in wasm, the transformer
// blocks, the VAE decoder and the text encoder's feature layers on the
// device when it takes them (the text encoder stays in wasm when only it
// does not fit).
type imageState struct {
	pipe    *diffusion.Pipeline
	dit     *device.DiTRunner
	vae     *device.VAEDecoder
	te      *webgpu.Backend
	backend string
	devErr  string
}

func (im *imageState) close() error {
	if im.te != nil {
		im.pipe.TextEncoder.SetLayers(nil)
		im.te.Close()
	}
	if im.dit != nil {
		im.dit.Close()
	}
	if im.vae != nil {
		im.vae.Close()
	}
	return im.pipe.Close()
}

// loadPipeline opens the pipeline at p (the OPFS copy) for load.
func (s *state) loadPipeline(p string, r request, info *loadInfo) error {
	t1 := time.Now()
	pipe, err := diffusion.Open(p, diffusion.OpenOptions{})
	if err != nil {
		return err
	}
	info.ImportSeconds = time.Since(t1).Seconds()
	t2 := time.Now()
	im := &imageState{pipe: pipe, backend: "cpu"}
	if r.Backend != "cpu" {
		err := func() error {
			dev, err := s.device()
			if err != nil {
				return err
			}
			ds, err := pipe.DiT.Spec()
			if err != nil {
				return err
			}
			var codec tensor.Codec // f32, unless the file's blocks are quantized
			if pipe.DiTQuant != "" {
				if codec, err = tensor.ParseCodec(pipe.DiTQuant); err != nil {
					return err
				}
			}
			if im.dit, err = device.NewDiTRunner(dev, ds, device.DiTOptions{Codec: codec}); err != nil {
				return err
			}
			vs, err := pipe.VAE.Spec()
			if err != nil {
				return err
			}
			if im.vae, err = device.NewVAEDecoder(dev, vs, device.VAEOptions{}); err != nil {
				return err
			}
			te := pipe.TextEncoder
			if b, err := webgpu.New(te.Model(), webgpu.Options{Device: dev, Layers: fmt.Sprintf("0-%d", te.Layers()-1)}); err == nil {
				im.te = b
				te.SetLayers(b.NewSession)
			}
			return nil
		}()
		if err != nil {
			im.devErr = err.Error()
			if im.dit != nil {
				im.dit.Close()
				im.dit = nil
			}
		} else {
			pipe.DiT.SetDevice(im.dit)
			pipe.SetDecoder(im.vae)
			im.backend = "webgpu"
		}
	}
	info.BackendSeconds = time.Since(t2).Seconds()
	c := pipe.DiT.Config
	info.Family, info.Layers, info.Hidden = "zimage", c.Layers, c.Dim
	info.Image, info.HasTokenizer, info.HasTemplate = true, true, true
	info.Backend, info.DeviceError = im.backend, im.devErr
	info.Context = pipe.TextEncoder.MaxTokens
	s.img = im
	return nil
}

var errNoImageModel = errors.New("no image model loaded: load a text-to-image pipeline (a pipeline .cmf file) first")

// imagine generates one image: "progress" events {step, steps} after each
// denoising step, then {png: Uint8Array, image: Float32Array [3, H, W] in
// [0, 1], width, height, steps, backend, seconds}.
func (s *state) imagine(ctx context.Context, r request) (js.Value, error) {
	if s.img == nil {
		return js.Value{}, errNoImageModel
	}
	t0 := time.Now()
	w, h, steps := r.Width, r.Height, r.Steps
	if w == 0 {
		w = 512
	}
	if h == 0 {
		h = 512
	}
	if steps == 0 {
		steps = 8
	}
	var y yielder
	res, err := s.img.pipe.Generate(diffusion.Options{Prompt: r.Prompt, Negative: r.Negative, Width: w, Height: h,
		Steps: steps, Guidance: r.Guidance, Seed: r.Seed, Latents: r.Latents, Context: ctx,
		Progress: func(step, n int) {
			reply(r.ID, "progress", map[string]any{"step": step, "steps": n})
			y.maybe()
		}})
	if err != nil {
		return js.Value{}, err
	}
	var png bytes.Buffer
	if err := diffusion.EncodePNG(&png, res.Image, res.Width, res.Height); err != nil {
		return js.Value{}, err
	}
	u8 := js.Global().Get("Uint8Array").New(png.Len())
	js.CopyBytesToJS(u8, png.Bytes())
	o := js.Global().Get("Object").New()
	o.Set("png", u8)
	o.Set("image", float32Array(res.Image))
	o.Set("width", res.Width)
	o.Set("height", res.Height)
	o.Set("steps", steps)
	o.Set("backend", s.img.backend)
	o.Set("seconds", time.Since(t0).Seconds())
	return o, nil
}

package webgpu

import (
	"fmt"
	"sort"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// checkCodecs refuses, before anything is uploaded, a model with a weight
// matrix in a codec no device kernel reads (a GGUF type without a prelude
// in shaders/codec_*.wgsl): the error names the tensor and the codec, wraps
// ErrUnsupported, and the engine runs the model on the CPU instead.
// Vectors (norms, biases) are widened to float32 at upload and pass.
func checkCodecs(m *model.Model) error {
	names := m.Weights.Names()
	sort.Strings(names)
	for _, name := range names {
		c, shape, err := weightInfo(m, name)
		if err != nil || len(shape) < 2 || c == tensor.I32 {
			continue
		}
		if _, err := deviceCodec(c); err != nil {
			return fmt.Errorf("webgpu: %w: tensor %q is %s, which no device kernel reads (the CPU engine runs it)", ErrUnsupported, name, c)
		}
		if shaders.Staged(c) && (name == model.TokenEmbd || name == model.Output) {
			return fmt.Errorf("webgpu: %w: tensor %q is %s, two products, which the device's embedding lookup and head do not run (the CPU engine runs it)", ErrUnsupported, name, c)
		}
	}
	return nil
}

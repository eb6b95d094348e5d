package cuda_test

import (
	"os"

	"github.com/cortiq/cortiq/cuda/kernels"
)

// CORTIQ_CUDA_PTX points the tests at a kernel image (a fatbin, or PTX
// text: then no programmatic dependent launches) built outside the
// tree (the GPU machine's `make cuda-kernels` output before it is
// committed).
func init() {
	if p := os.Getenv("CORTIQ_CUDA_PTX"); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			kernels.Image = b
		}
	}
}

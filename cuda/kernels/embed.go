package kernels

import (
	_ "embed"
	"encoding/binary"
)

// Image is the module of every ck_* kernel, compiled ahead from kernels.cu
// by `make cuda-kernels` into a fatbin: sm_80 and sm_90 cubins, which the
// driver loads as they are, and compute_80 PTX, which it JIT-compiles for
// newer chips (once; the driver caches the result). Load it with
// cuModuleLoadData. (It was PTX alone until session 8: the first load on a
// machine JIT-compiled 8.5 MB of PTX, 27-36 s on the H200; the sm_90 cubin
// loads in under a second. The image is 12.2 MB, 3.7 MB more than the PTX
// was; the cubins come from the nvcc that ran `make cuda-kernels`, whose
// ptxas may schedule differently from the driver's JIT.)
//
//go:embed kernels.fatbin
var Image []byte

// SourceSums is kernels.sha256: the sha256 of each source, of the PTX and
// of the fatbin as `make cuda-kernels` recorded them; TestPTXFresh
// compares it with the files.
//
//go:embed kernels.sha256
var SourceSums string

// fatbinMagic starts a fatbin (fatBinaryCtl's FATBIN_MAGIC, little endian).
const fatbinMagic = 0xBA55ED50

// Dependent reports whether image's kernels may be launched as
// programmatic dependents (PDL: each kernel waits in griddepcontrol for
// the one before it) on a device of compute capability major.minor: only
// a fatbin from `make cuda-kernels` run on sm_90, where the driver picks
// the sm_90 cubin, whose kernels wait. Elsewhere (Ampere's cubin, the PTX
// JIT-compiled for newer chips, an image of PTX text) the kernels do not
// wait, and launching them so would race.
func Dependent(image []byte, major, minor int) bool {
	return major == 9 && minor == 0 && len(image) >= 4 && binary.LittleEndian.Uint32(image) == fatbinMagic
}

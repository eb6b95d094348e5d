package kernels

import _ "embed"

// PTX is the module of every ck_* kernel, compiled ahead from kernels.cu by
// `make cuda-kernels` (nvcc -ptx -arch=compute_80: the driver JITs it for
// Ampere and newer). Load it with cuModuleLoadData.
//
//go:embed kernels.ptx
var PTX []byte

// SourceSums is kernels.sha256: the sha256 of each source and of the PTX
// as `make cuda-kernels` recorded them; TestPTXFresh compares it with the
// files.
//
//go:embed kernels.sha256
var SourceSums string

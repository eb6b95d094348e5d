// kernels.cu: the one module `make cuda-kernels` compiles to kernels.ptx.
#include "elementwise.cu"
#include "matvec.cu"
#include "attention.cu"
#include "gemm.cu"
#include "gemmq.cu"
#include "flash.cu"
#include "dit.cu"

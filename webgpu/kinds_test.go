package webgpu

import "github.com/cortiq/cortiq/shaders"

// The kernels' binding kinds, from the kernel table, for tests that build
// pipelines by hand.
var (
	kindsEmbed      = kinds(shaders.KEmbed)
	kindsMatmul     = kinds(shaders.KMatmul)
	kindsMatmulNorm = kinds(shaders.KMatmulNorm)
	kindsNorm       = kinds(shaders.KRMSNorm)
	kindsNormIP     = kinds(shaders.KRMSNormIP)
	kindsPrep       = kinds(shaders.QKVPrep)
	kindsAttn       = kinds(shaders.Attention)
	kindsCombine    = kinds(shaders.Combine)
	kindsAct        = kinds(shaders.ActMul)
	kindsArgmax     = kinds(shaders.Argmax)
	kindsArgmaxPart = kinds(shaders.ArgmaxPart)
	kindsAdvance    = kinds(shaders.Advance)
)

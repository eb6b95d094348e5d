//go:build arm64 && !purego

#include "textflag.h"

// arm64 NEON kernels (kernel_arm64.go). The Go assembler lacks FADD,
// FADDP, SDOT, SMULL and SADALP on vectors: they are encoded as WORDs,
// each with its instruction in the comment.

// func dotF32NEON(a, b *float32, n int) float32
// n is a positive multiple of 16. Sixteen partial sums (four vectors of
// four lanes; element i goes to lane i mod 16), fused multiply-adds,
// combined as ((v0+v1)+(v2+v3)) lanewise, then (l0+l1)+(l2+l3).
TEXT ·dotF32NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

loop:
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA  V16.S4, V4.S4, V0.S4
	VFMLA  V17.S4, V5.S4, V1.S4
	VFMLA  V18.S4, V6.S4, V2.S4
	VFMLA  V19.S4, V7.S4, V3.S4
	SUBS   $16, R2
	BNE    loop

	WORD $0x4e21d400 // fadd v0.4s, v0.4s, v1.4s
	WORD $0x4e23d442 // fadd v2.4s, v2.4s, v3.4s
	WORD $0x4e22d400 // fadd v0.4s, v0.4s, v2.4s
	WORD $0x6e20d400 // faddp v0.4s, v0.4s, v0.4s
	WORD $0x7e30d800 // faddp s0, v0.2s
	FMOVS F0, ret+24(FP)
	RET

// F0-F31 are the low lanes of V0-V31: scalar constants live in registers
// the vector code leaves alone.

// The Int8 block dots: w points at nb weight blocks, xq at the quantized
// activations (32 per block), xd at their block scales, tab at f16Table.
// The integer sum of a block is exact whatever the instructions; the
// float arithmetic per block is the portable code's as the Go compiler
// emits it on arm64 (dotQ8_0Int8, dotQ4_0Int8: fused multiply-adds), so
// the results are bit-identical to it.

// func dotQ8_0Q8SDOT(w *byte, xq *int8, xd *float32, nb int, tab *float32) float32
TEXT ·dotQ8_0Q8SDOT(SB), NOSPLIT, $0-44
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD xd+16(FP), R2
	MOVD nb+24(FP), R3
	MOVD tab+32(FP), R4
	FMOVS ZR, F0

q8sdot:
	MOVHU  (R0), R5
	ADD    $2, R0, R7
	VLD1   (R7), [V1.B16, V2.B16]
	ADD    $34, R0
	VLD1.P 32(R1), [V3.B16, V4.B16]
	VEOR   V5.B16, V5.B16, V5.B16
	WORD   $0x4e839425 // sdot v5.4s, v1.16b, v3.16b
	WORD   $0x4e849445 // sdot v5.4s, v2.16b, v4.16b
	VADDV  V5.S4, V5
	VMOV   V5.S[0], R6
	FMOVS  (R4)(R5<<2), F1
	FMOVS.P 4(R2), F2
	FMULS  F2, F1, F1
	SCVTFWS R6, F2
	FMADDS F2, F0, F1, F0
	SUBS   $1, R3
	BNE    q8sdot
	FMOVS  F0, ret+40(FP)
	RET

// func dotQ8_0Q8NEON(w *byte, xq *int8, xd *float32, nb int, tab *float32) float32
TEXT ·dotQ8_0Q8NEON(SB), NOSPLIT, $0-44
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD xd+16(FP), R2
	MOVD nb+24(FP), R3
	MOVD tab+32(FP), R4
	FMOVS ZR, F0

q8neon:
	MOVHU  (R0), R5
	ADD    $2, R0, R7
	VLD1   (R7), [V1.B16, V2.B16]
	ADD    $34, R0
	VLD1.P 32(R1), [V3.B16, V4.B16]
	VEOR   V5.B16, V5.B16, V5.B16
	WORD   $0x0e23c026 // smull v6.8h, v1.8b, v3.8b
	WORD   $0x4e23c027 // smull2 v7.8h, v1.16b, v3.16b
	WORD   $0x4e6068c5 // sadalp v5.4s, v6.8h
	WORD   $0x4e6068e5 // sadalp v5.4s, v7.8h
	WORD   $0x0e24c046 // smull v6.8h, v2.8b, v4.8b
	WORD   $0x4e24c047 // smull2 v7.8h, v2.16b, v4.16b
	WORD   $0x4e6068c5 // sadalp v5.4s, v6.8h
	WORD   $0x4e6068e5 // sadalp v5.4s, v7.8h
	VADDV  V5.S4, V5
	VMOV   V5.S[0], R6
	FMOVS  (R4)(R5<<2), F1
	FMOVS.P 4(R2), F2
	FMULS  F2, F1, F1
	SCVTFWS R6, F2
	FMADDS F2, F0, F1, F0
	SUBS   $1, R3
	BNE    q8neon
	FMOVS  F0, ret+40(FP)
	RET

// q4_0: the low nibbles of a block's 16 bytes pair with activations 0-15,
// the high ones with 16-31 (both 0..15, valid signed bytes); xs holds
// d·Σq per block for the -8 offset.

// func dotQ4_0Q8SDOT(w *byte, xq *int8, xd, xs *float32, nb int, tab *float32) float32
TEXT ·dotQ4_0Q8SDOT(SB), NOSPLIT, $0-52
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD xd+16(FP), R2
	MOVD xs+24(FP), R8
	MOVD nb+32(FP), R3
	MOVD tab+40(FP), R4
	FMOVS ZR, F0
	FMOVS $8.0, F16
	VMOVI $15, V31.B16

q4sdot:
	MOVHU  (R0), R5
	ADD    $2, R0, R7
	VLD1   (R7), [V1.B16]
	ADD    $18, R0
	VLD1.P 32(R1), [V3.B16, V4.B16]
	VAND   V31.B16, V1.B16, V2.B16
	VUSHR  $4, V1.B16, V1.B16
	VEOR   V5.B16, V5.B16, V5.B16
	WORD   $0x4e839445 // sdot v5.4s, v2.16b, v3.16b
	WORD   $0x4e849425 // sdot v5.4s, v1.16b, v4.16b
	VADDV  V5.S4, V5
	VMOV   V5.S[0], R6
	FMOVS.P 4(R2), F1
	SCVTFWS R6, F2
	FMOVS  (R4)(R5<<2), F3
	FMULS  F1, F2, F1
	FMOVS.P 4(R8), F2
	FMSUBS F16, F1, F2, F1
	FMADDS F1, F0, F3, F0
	SUBS   $1, R3
	BNE    q4sdot
	FMOVS  F0, ret+48(FP)
	RET

// func dotQ4_0Q8NEON(w *byte, xq *int8, xd, xs *float32, nb int, tab *float32) float32
TEXT ·dotQ4_0Q8NEON(SB), NOSPLIT, $0-52
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD xd+16(FP), R2
	MOVD xs+24(FP), R8
	MOVD nb+32(FP), R3
	MOVD tab+40(FP), R4
	FMOVS ZR, F0
	FMOVS $8.0, F16
	VMOVI $15, V31.B16

q4neon:
	MOVHU  (R0), R5
	ADD    $2, R0, R7
	VLD1   (R7), [V1.B16]
	ADD    $18, R0
	VLD1.P 32(R1), [V3.B16, V4.B16]
	VAND   V31.B16, V1.B16, V2.B16
	VUSHR  $4, V1.B16, V1.B16
	VEOR   V5.B16, V5.B16, V5.B16
	WORD   $0x0e23c046 // smull v6.8h, v2.8b, v3.8b
	WORD   $0x4e23c047 // smull2 v7.8h, v2.16b, v3.16b
	WORD   $0x4e6068c5 // sadalp v5.4s, v6.8h
	WORD   $0x4e6068e5 // sadalp v5.4s, v7.8h
	WORD   $0x0e24c026 // smull v6.8h, v1.8b, v4.8b
	WORD   $0x4e24c027 // smull2 v7.8h, v1.16b, v4.16b
	WORD   $0x4e6068c5 // sadalp v5.4s, v6.8h
	WORD   $0x4e6068e5 // sadalp v5.4s, v7.8h
	VADDV  V5.S4, V5
	VMOV   V5.S[0], R6
	FMOVS.P 4(R2), F1
	SCVTFWS R6, F2
	FMOVS  (R4)(R5<<2), F3
	FMULS  F1, F2, F1
	FMOVS.P 4(R8), F2
	FMSUBS F16, F1, F2, F1
	FMADDS F1, F0, F3, F0
	SUBS   $1, R3
	BNE    q4neon
	FMOVS  F0, ret+48(FP)
	RET

// func dotF16NEON(w *byte, x *float32, n int) float32
// dotF32NEON's sums over float16 weights (FCVTL widens them exactly).
TEXT ·dotF16NEON(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

f16loop:
	VLD1.P 32(R0), [V4.B16, V5.B16]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	WORD   $0x0e217886 // fcvtl v6.4s, v4.4h
	WORD   $0x4e217887 // fcvtl2 v7.4s, v4.8h
	WORD   $0x0e2178b4 // fcvtl v20.4s, v5.4h
	WORD   $0x4e2178b5 // fcvtl2 v21.4s, v5.8h
	VFMLA  V16.S4, V6.S4, V0.S4
	VFMLA  V17.S4, V7.S4, V1.S4
	VFMLA  V18.S4, V20.S4, V2.S4
	VFMLA  V19.S4, V21.S4, V3.S4
	SUBS   $16, R2
	BNE    f16loop

	WORD $0x4e21d400 // fadd v0.4s, v0.4s, v1.4s
	WORD $0x4e23d442 // fadd v2.4s, v2.4s, v3.4s
	WORD $0x4e22d400 // fadd v0.4s, v0.4s, v2.4s
	WORD $0x6e20d400 // faddp v0.4s, v0.4s, v0.4s
	WORD $0x7e30d800 // faddp s0, v0.2s
	FMOVS F0, ret+24(FP)
	RET

// func dotBF16NEON(w *byte, x *float32, n int) float32
// The same over bfloat16 weights: interleaved with zero halves (ZIP),
// each becomes the float32 with its bits on top.
TEXT ·dotBF16NEON(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V31.B16, V31.B16, V31.B16

bf16loop:
	VLD1.P 32(R0), [V4.H8, V5.H8]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VZIP1  V4.H8, V31.H8, V6.H8
	VZIP2  V4.H8, V31.H8, V7.H8
	VZIP1  V5.H8, V31.H8, V20.H8
	VZIP2  V5.H8, V31.H8, V21.H8
	VFMLA  V16.S4, V6.S4, V0.S4
	VFMLA  V17.S4, V7.S4, V1.S4
	VFMLA  V18.S4, V20.S4, V2.S4
	VFMLA  V19.S4, V21.S4, V3.S4
	SUBS   $16, R2
	BNE    bf16loop

	WORD $0x4e21d400 // fadd v0.4s, v0.4s, v1.4s
	WORD $0x4e23d442 // fadd v2.4s, v2.4s, v3.4s
	WORD $0x4e22d400 // fadd v0.4s, v0.4s, v2.4s
	WORD $0x6e20d400 // faddp v0.4s, v0.4s, v0.4s
	WORD $0x7e30d800 // faddp s0, v0.2s
	FMOVS F0, ret+24(FP)
	RET

// The decoders write exactly tensor.Dequantize's values: each weight
// widens to int32, converts exactly, and is multiplied by the block scale
// once, as the portable code does.

// func decodeQ8_0NEON(dst *float32, w *byte, nb int, tab *float32)
TEXT ·decodeQ8_0NEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD w+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD tab+24(FP), R4

dq8loop:
	MOVHU  (R1), R5
	ADD    $2, R1, R7
	VLD1   (R7), [V0.B16, V1.B16]
	ADD    $34, R1
	FMOVS  (R4)(R5<<2), F31
	WORD   $0x0f08a410 // sxtl v16.8h, v0.8b
	WORD   $0x4f08a411 // sxtl2 v17.8h, v0.16b
	WORD   $0x0f08a432 // sxtl v18.8h, v1.8b
	WORD   $0x4f08a433 // sxtl2 v19.8h, v1.16b
	WORD   $0x0f10a614 // sxtl v20.4s, v16.4h
	WORD   $0x4f10a615 // sxtl2 v21.4s, v16.8h
	WORD   $0x0f10a636 // sxtl v22.4s, v17.4h
	WORD   $0x4f10a637 // sxtl2 v23.4s, v17.8h
	WORD   $0x0f10a658 // sxtl v24.4s, v18.4h
	WORD   $0x4f10a659 // sxtl2 v25.4s, v18.8h
	WORD   $0x0f10a67a // sxtl v26.4s, v19.4h
	WORD   $0x4f10a67b // sxtl2 v27.4s, v19.8h
	WORD   $0x4e21da94 // scvtf v20.4s, v20.4s
	WORD   $0x4e21dab5 // scvtf v21.4s, v21.4s
	WORD   $0x4e21dad6 // scvtf v22.4s, v22.4s
	WORD   $0x4e21daf7 // scvtf v23.4s, v23.4s
	WORD   $0x4e21db18 // scvtf v24.4s, v24.4s
	WORD   $0x4e21db39 // scvtf v25.4s, v25.4s
	WORD   $0x4e21db5a // scvtf v26.4s, v26.4s
	WORD   $0x4e21db7b // scvtf v27.4s, v27.4s
	WORD   $0x4f9f9294 // fmul v20.4s, v20.4s, v31.s[0]
	WORD   $0x4f9f92b5 // fmul v21.4s, v21.4s, v31.s[0]
	WORD   $0x4f9f92d6 // fmul v22.4s, v22.4s, v31.s[0]
	WORD   $0x4f9f92f7 // fmul v23.4s, v23.4s, v31.s[0]
	WORD   $0x4f9f9318 // fmul v24.4s, v24.4s, v31.s[0]
	WORD   $0x4f9f9339 // fmul v25.4s, v25.4s, v31.s[0]
	WORD   $0x4f9f935a // fmul v26.4s, v26.4s, v31.s[0]
	WORD   $0x4f9f937b // fmul v27.4s, v27.4s, v31.s[0]
	VST1.P [V20.S4, V21.S4, V22.S4, V23.S4], 64(R0)
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R0)
	SUBS   $1, R2
	BNE    dq8loop
	RET

// func decodeQ4_0NEON(dst *float32, w *byte, nb int, tab *float32)
TEXT ·decodeQ4_0NEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD w+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD tab+24(FP), R4
	VMOVI  $15, V29.B16
	VMOVI  $8, V30.B16

dq4loop:
	MOVHU  (R1), R5
	ADD    $2, R1, R7
	VLD1   (R7), [V1.B16]
	ADD    $18, R1
	FMOVS  (R4)(R5<<2), F31
	VAND   V29.B16, V1.B16, V0.B16
	VUSHR  $4, V1.B16, V1.B16
	WORD   $0x6e3e8400 // sub v0.16b, v0.16b, v30.16b
	WORD   $0x6e3e8421 // sub v1.16b, v1.16b, v30.16b
	WORD   $0x0f08a410 // sxtl v16.8h, v0.8b
	WORD   $0x4f08a411 // sxtl2 v17.8h, v0.16b
	WORD   $0x0f08a432 // sxtl v18.8h, v1.8b
	WORD   $0x4f08a433 // sxtl2 v19.8h, v1.16b
	WORD   $0x0f10a614 // sxtl v20.4s, v16.4h
	WORD   $0x4f10a615 // sxtl2 v21.4s, v16.8h
	WORD   $0x0f10a636 // sxtl v22.4s, v17.4h
	WORD   $0x4f10a637 // sxtl2 v23.4s, v17.8h
	WORD   $0x0f10a658 // sxtl v24.4s, v18.4h
	WORD   $0x4f10a659 // sxtl2 v25.4s, v18.8h
	WORD   $0x0f10a67a // sxtl v26.4s, v19.4h
	WORD   $0x4f10a67b // sxtl2 v27.4s, v19.8h
	WORD   $0x4e21da94 // scvtf v20.4s, v20.4s
	WORD   $0x4e21dab5 // scvtf v21.4s, v21.4s
	WORD   $0x4e21dad6 // scvtf v22.4s, v22.4s
	WORD   $0x4e21daf7 // scvtf v23.4s, v23.4s
	WORD   $0x4e21db18 // scvtf v24.4s, v24.4s
	WORD   $0x4e21db39 // scvtf v25.4s, v25.4s
	WORD   $0x4e21db5a // scvtf v26.4s, v26.4s
	WORD   $0x4e21db7b // scvtf v27.4s, v27.4s
	WORD   $0x4f9f9294 // fmul v20.4s, v20.4s, v31.s[0]
	WORD   $0x4f9f92b5 // fmul v21.4s, v21.4s, v31.s[0]
	WORD   $0x4f9f92d6 // fmul v22.4s, v22.4s, v31.s[0]
	WORD   $0x4f9f92f7 // fmul v23.4s, v23.4s, v31.s[0]
	WORD   $0x4f9f9318 // fmul v24.4s, v24.4s, v31.s[0]
	WORD   $0x4f9f9339 // fmul v25.4s, v25.4s, v31.s[0]
	WORD   $0x4f9f935a // fmul v26.4s, v26.4s, v31.s[0]
	WORD   $0x4f9f937b // fmul v27.4s, v27.4s, v31.s[0]
	VST1.P [V20.S4, V21.S4, V22.S4, V23.S4], 64(R0)
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R0)
	SUBS   $1, R2
	BNE    dq4loop
	RET

// func gemm4x2NEON(w *float32, ldw int, x *float32, ldx int, n int, out *[8]float32)
// Four weight rows (ldw floats apart) times two activation rows (ldx
// floats apart; 0 for one token twice): out[2*i+t] = w_i · x_t over n
// elements, n a positive multiple of 4. Each output sums in four lanes
// (element k in lane k mod 4), combined as (l0+l1)+(l2+l3).
TEXT ·gemm4x2NEON(SB), NOSPLIT, $0-48
	MOVD w+0(FP), R6
	MOVD ldw+8(FP), R1
	MOVD x+16(FP), R10
	MOVD ldx+24(FP), R3
	MOVD n+32(FP), R4
	MOVD out+40(FP), R5
	LSL  $2, R1
	LSL  $2, R3
	ADD  R1, R6, R7
	ADD  R1, R7, R8
	ADD  R1, R8, R9
	ADD  R3, R10, R11
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16

g42loop:
	VLD1.P 16(R6), [V16.S4]
	VLD1.P 16(R7), [V17.S4]
	VLD1.P 16(R8), [V18.S4]
	VLD1.P 16(R9), [V19.S4]
	VLD1.P 16(R10), [V20.S4]
	VLD1.P 16(R11), [V21.S4]
	VFMLA  V20.S4, V16.S4, V0.S4
	VFMLA  V21.S4, V16.S4, V1.S4
	VFMLA  V20.S4, V17.S4, V2.S4
	VFMLA  V21.S4, V17.S4, V3.S4
	VFMLA  V20.S4, V18.S4, V4.S4
	VFMLA  V21.S4, V18.S4, V5.S4
	VFMLA  V20.S4, V19.S4, V6.S4
	VFMLA  V21.S4, V19.S4, V7.S4
	SUBS   $4, R4
	BNE    g42loop

	WORD   $0x6e21d410 // faddp v16.4s, v0.4s, v1.4s
	WORD   $0x6e23d451 // faddp v17.4s, v2.4s, v3.4s
	WORD   $0x6e31d618 // faddp v24.4s, v16.4s, v17.4s
	WORD   $0x6e25d492 // faddp v18.4s, v4.4s, v5.4s
	WORD   $0x6e27d4d3 // faddp v19.4s, v6.4s, v7.4s
	WORD   $0x6e33d659 // faddp v25.4s, v18.4s, v19.4s
	VST1   [V24.S4, V25.S4], (R5)
	RET

// func dotQ4_KSubNEON(w *byte, x *float32, nb int, out *float32)
// For nb q4_K super-blocks, the eight float dots Σ q·x of their 32-element
// sub-blocks (q the 4-bit quants, 0..15) into out[0:8*nb]; the caller
// applies the scales and mins. Each sums in eight lanes (two
// accumulators a, b), combined as ((a0+b0)+(a1+b1))+((a2+b2)+(a3+b3)).
TEXT ·dotQ4_KSubNEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD out+24(FP), R3
	VMOVI $15, V31.B16

q4kblock:
	ADD    $16, R0
	MOVD   $4, R4

q4kpair:
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VAND   V31.B16, V0.B16, V3.B16
	VAND   V31.B16, V1.B16, V4.B16
	VUSHR  $4, V0.B16, V5.B16
	VUSHR  $4, V1.B16, V6.B16
	VUXTL  V3.B8, V8.H8
	VUXTL2 V3.B16, V9.H8
	VUXTL  V4.B8, V10.H8
	VUXTL2 V4.B16, V11.H8
	VUXTL  V8.H4, V12.S4
	VUXTL2 V8.H8, V13.S4
	VUXTL  V9.H4, V14.S4
	VUXTL2 V9.H8, V15.S4
	VUXTL  V10.H4, V16.S4
	VUXTL2 V10.H8, V17.S4
	VUXTL  V11.H4, V18.S4
	VUXTL2 V11.H8, V19.S4
	WORD   $0x6e21d98c // ucvtf v12.4s, v12.4s
	WORD   $0x6e21d9ad // ucvtf v13.4s, v13.4s
	WORD   $0x6e21d9ce // ucvtf v14.4s, v14.4s
	WORD   $0x6e21d9ef // ucvtf v15.4s, v15.4s
	WORD   $0x6e21da10 // ucvtf v16.4s, v16.4s
	WORD   $0x6e21da31 // ucvtf v17.4s, v17.4s
	WORD   $0x6e21da52 // ucvtf v18.4s, v18.4s
	WORD   $0x6e21da73 // ucvtf v19.4s, v19.4s
	VLD1.P 64(R1), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R1), [V24.S4, V25.S4, V26.S4, V27.S4]
	VEOR   V28.B16, V28.B16, V28.B16
	VEOR   V29.B16, V29.B16, V29.B16
	VFMLA  V20.S4, V12.S4, V28.S4
	VFMLA  V21.S4, V13.S4, V29.S4
	VFMLA  V22.S4, V14.S4, V28.S4
	VFMLA  V23.S4, V15.S4, V29.S4
	VFMLA  V24.S4, V16.S4, V28.S4
	VFMLA  V25.S4, V17.S4, V29.S4
	VFMLA  V26.S4, V18.S4, V28.S4
	VFMLA  V27.S4, V19.S4, V29.S4
	WORD   $0x4e3dd79c // fadd v28.4s, v28.4s, v29.4s
	WORD   $0x6e3cd79c // faddp v28.4s, v28.4s, v28.4s
	WORD   $0x7e30db9c // faddp s28, v28.2s
	FMOVS.P F28, 4(R3)
	VUXTL  V5.B8, V8.H8
	VUXTL2 V5.B16, V9.H8
	VUXTL  V6.B8, V10.H8
	VUXTL2 V6.B16, V11.H8
	VUXTL  V8.H4, V12.S4
	VUXTL2 V8.H8, V13.S4
	VUXTL  V9.H4, V14.S4
	VUXTL2 V9.H8, V15.S4
	VUXTL  V10.H4, V16.S4
	VUXTL2 V10.H8, V17.S4
	VUXTL  V11.H4, V18.S4
	VUXTL2 V11.H8, V19.S4
	WORD   $0x6e21d98c // ucvtf v12.4s, v12.4s
	WORD   $0x6e21d9ad // ucvtf v13.4s, v13.4s
	WORD   $0x6e21d9ce // ucvtf v14.4s, v14.4s
	WORD   $0x6e21d9ef // ucvtf v15.4s, v15.4s
	WORD   $0x6e21da10 // ucvtf v16.4s, v16.4s
	WORD   $0x6e21da31 // ucvtf v17.4s, v17.4s
	WORD   $0x6e21da52 // ucvtf v18.4s, v18.4s
	WORD   $0x6e21da73 // ucvtf v19.4s, v19.4s
	VLD1.P 64(R1), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R1), [V24.S4, V25.S4, V26.S4, V27.S4]
	VEOR   V28.B16, V28.B16, V28.B16
	VEOR   V29.B16, V29.B16, V29.B16
	VFMLA  V20.S4, V12.S4, V28.S4
	VFMLA  V21.S4, V13.S4, V29.S4
	VFMLA  V22.S4, V14.S4, V28.S4
	VFMLA  V23.S4, V15.S4, V29.S4
	VFMLA  V24.S4, V16.S4, V28.S4
	VFMLA  V25.S4, V17.S4, V29.S4
	VFMLA  V26.S4, V18.S4, V28.S4
	VFMLA  V27.S4, V19.S4, V29.S4
	WORD   $0x4e3dd79c // fadd v28.4s, v28.4s, v29.4s
	WORD   $0x6e3cd79c // faddp v28.4s, v28.4s, v28.4s
	WORD   $0x7e30db9c // faddp s28, v28.2s
	FMOVS.P F28, 4(R3)
	SUBS   $1, R4
	BNE    q4kpair
	SUBS   $1, R2
	BNE    q4kblock
	RET

// func dotQ6_KSubNEON(w *byte, x *float32, nb int, out *float32)
// For nb q6_K super-blocks, the sixteen float dots Σ q·x of their
// 16-element sub-blocks (q the 6-bit quants less 32) into out[0:16*nb],
// in the order of their scales; the caller applies them. Each sums in
// four lanes, combined as (l0+l1)+(l2+l3).
TEXT ·dotQ6_KSubNEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD out+24(FP), R3
	VMOVI $15, V31.B16
	VMOVI $3, V30.B16
	VMOVI $32, V29.B16

q6kblock:
	ADD    $128, R0, R5
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND   V31.B16, V0.B16, V6.B16
	VAND   V31.B16, V1.B16, V7.B16
	VAND   V30.B16, V4.B16, V8.B16
	VAND   V30.B16, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VAND   V31.B16, V2.B16, V6.B16
	VAND   V31.B16, V3.B16, V7.B16
	VUSHR  $2, V4.B16, V8.B16
	VUSHR  $2, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VUSHR  $4, V0.B16, V6.B16
	VUSHR  $4, V1.B16, V7.B16
	VUSHR  $4, V4.B16, V8.B16
	VUSHR  $4, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VUSHR  $4, V2.B16, V6.B16
	VUSHR  $4, V3.B16, V7.B16
	VUSHR  $6, V4.B16, V8.B16
	VUSHR  $6, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND   V31.B16, V0.B16, V6.B16
	VAND   V31.B16, V1.B16, V7.B16
	VAND   V30.B16, V4.B16, V8.B16
	VAND   V30.B16, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VAND   V31.B16, V2.B16, V6.B16
	VAND   V31.B16, V3.B16, V7.B16
	VUSHR  $2, V4.B16, V8.B16
	VUSHR  $2, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VUSHR  $4, V0.B16, V6.B16
	VUSHR  $4, V1.B16, V7.B16
	VUSHR  $4, V4.B16, V8.B16
	VUSHR  $4, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	VUSHR  $4, V2.B16, V6.B16
	VUSHR  $4, V3.B16, V7.B16
	VUSHR  $6, V4.B16, V8.B16
	VUSHR  $6, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	WORD   $0x0f08a4ca // sxtl v10.8h, v6.8b
	WORD   $0x4f08a4cb // sxtl2 v11.8h, v6.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	WORD   $0x0f08a4ea // sxtl v10.8h, v7.8b
	WORD   $0x4f08a4eb // sxtl2 v11.8h, v7.16b
	WORD   $0x0f10a54c // sxtl v12.4s, v10.4h
	WORD   $0x4f10a54d // sxtl2 v13.4s, v10.8h
	WORD   $0x0f10a56e // sxtl v14.4s, v11.4h
	WORD   $0x4f10a56f // sxtl2 v15.4s, v11.8h
	WORD   $0x4e21d98c // scvtf v12.4s, v12.4s
	WORD   $0x4e21d9ad // scvtf v13.4s, v13.4s
	WORD   $0x4e21d9ce // scvtf v14.4s, v14.4s
	WORD   $0x4e21d9ef // scvtf v15.4s, v15.4s
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VEOR   V20.B16, V20.B16, V20.B16
	VFMLA  V16.S4, V12.S4, V20.S4
	VFMLA  V17.S4, V13.S4, V20.S4
	VFMLA  V18.S4, V14.S4, V20.S4
	VFMLA  V19.S4, V15.S4, V20.S4
	WORD   $0x6e34d694 // faddp v20.4s, v20.4s, v20.4s
	WORD   $0x7e30da94 // faddp s20, v20.2s
	FMOVS.P F20, 4(R3)
	ADD    $82, R0
	SUBS   $1, R2
	BNE    q6kblock
	RET

// The Int8 q4_K sub-block sums: for nb super-blocks, the eight integer
// dots Σ q·xq of their 32-element sub-blocks (q the 4-bit quants 0..15,
// xq the activations quantized per 32, which the sub-blocks match) into
// out[0:8*nb] (int32 bits, stored from the vector registers); the caller
// applies the scales and mins. Exact whatever the instructions.

// func q4KQ8SubSDOT(w *byte, xq *int8, nb int, out *int32)
TEXT ·q4KQ8SubSDOT(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD out+24(FP), R3
	VMOVI $15, V31.B16

q4KQ8SubSDOTblock:
	ADD    $16, R0
	MOVD   $4, R4

q4KQ8SubSDOTpair:
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VLD1.P 64(R1), [V16.B16, V17.B16, V18.B16, V19.B16]
	VAND   V31.B16, V0.B16, V2.B16
	VAND   V31.B16, V1.B16, V3.B16
	VUSHR  $4, V0.B16, V4.B16
	VUSHR  $4, V1.B16, V5.B16
	VEOR   V6.B16, V6.B16, V6.B16
	VEOR   V7.B16, V7.B16, V7.B16
	WORD   $0x4e909446 // sdot v6.4s, v2.16b, v16.16b
	WORD   $0x4e919466 // sdot v6.4s, v3.16b, v17.16b
	WORD   $0x4e929487 // sdot v7.4s, v4.16b, v18.16b
	WORD   $0x4e9394a7 // sdot v7.4s, v5.16b, v19.16b
	VADDV  V6.S4, V6
	VADDV  V7.S4, V7
	FMOVS.P F6, 4(R3)
	FMOVS.P F7, 4(R3)
	SUBS   $1, R4
	BNE    q4KQ8SubSDOTpair
	SUBS   $1, R2
	BNE    q4KQ8SubSDOTblock
	RET

// func q4KQ8SubNEON(w *byte, xq *int8, nb int, out *int32)
TEXT ·q4KQ8SubNEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD out+24(FP), R3
	VMOVI $15, V31.B16

q4KQ8SubNEONblock:
	ADD    $16, R0
	MOVD   $4, R4

q4KQ8SubNEONpair:
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VLD1.P 64(R1), [V16.B16, V17.B16, V18.B16, V19.B16]
	VAND   V31.B16, V0.B16, V2.B16
	VAND   V31.B16, V1.B16, V3.B16
	VUSHR  $4, V0.B16, V4.B16
	VUSHR  $4, V1.B16, V5.B16
	VEOR   V6.B16, V6.B16, V6.B16
	VEOR   V7.B16, V7.B16, V7.B16
	WORD   $0x0e30c054 // smull v20.8h, v2.8b, v16.8b
	WORD   $0x4e30c055 // smull2 v21.8h, v2.16b, v16.16b
	WORD   $0x4e606a86 // sadalp v6.4s, v20.8h
	WORD   $0x4e606aa6 // sadalp v6.4s, v21.8h
	WORD   $0x0e31c074 // smull v20.8h, v3.8b, v17.8b
	WORD   $0x4e31c075 // smull2 v21.8h, v3.16b, v17.16b
	WORD   $0x4e606a86 // sadalp v6.4s, v20.8h
	WORD   $0x4e606aa6 // sadalp v6.4s, v21.8h
	WORD   $0x0e32c094 // smull v20.8h, v4.8b, v18.8b
	WORD   $0x4e32c095 // smull2 v21.8h, v4.16b, v18.16b
	WORD   $0x4e606a87 // sadalp v7.4s, v20.8h
	WORD   $0x4e606aa7 // sadalp v7.4s, v21.8h
	WORD   $0x0e33c0b4 // smull v20.8h, v5.8b, v19.8b
	WORD   $0x4e33c0b5 // smull2 v21.8h, v5.16b, v19.16b
	WORD   $0x4e606a87 // sadalp v7.4s, v20.8h
	WORD   $0x4e606aa7 // sadalp v7.4s, v21.8h
	VADDV  V6.S4, V6
	VADDV  V7.S4, V7
	FMOVS.P F6, 4(R3)
	FMOVS.P F7, 4(R3)
	SUBS   $1, R4
	BNE    q4KQ8SubNEONpair
	SUBS   $1, R2
	BNE    q4KQ8SubNEONblock
	RET

// The Int8 q6_K sub-block sums: for nb super-blocks, the sixteen integer
// dots Σ q·xq of their 16-element sub-blocks (q the 6-bit quants less 32)
// into out[0:16*nb] in the order of their scales (int32 bits); the caller
// applies the scales. Exact whatever the instructions.

// func q6KQ8SubSDOT(w *byte, xq *int8, nb int, out *int32)
TEXT ·q6KQ8SubSDOT(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD out+24(FP), R3
	VMOVI $15, V31.B16
	VMOVI $3, V30.B16
	VMOVI $32, V29.B16

q6KQ8SubSDOTblock:
	ADD    $128, R0, R5
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND   V31.B16, V0.B16, V6.B16
	VAND   V31.B16, V1.B16, V7.B16
	VAND   V30.B16, V4.B16, V8.B16
	VAND   V30.B16, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VAND   V31.B16, V2.B16, V6.B16
	VAND   V31.B16, V3.B16, V7.B16
	VUSHR  $2, V4.B16, V8.B16
	VUSHR  $2, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V0.B16, V6.B16
	VUSHR  $4, V1.B16, V7.B16
	VUSHR  $4, V4.B16, V8.B16
	VUSHR  $4, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V2.B16, V6.B16
	VUSHR  $4, V3.B16, V7.B16
	VUSHR  $6, V4.B16, V8.B16
	VUSHR  $6, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND   V31.B16, V0.B16, V6.B16
	VAND   V31.B16, V1.B16, V7.B16
	VAND   V30.B16, V4.B16, V8.B16
	VAND   V30.B16, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VAND   V31.B16, V2.B16, V6.B16
	VAND   V31.B16, V3.B16, V7.B16
	VUSHR  $2, V4.B16, V8.B16
	VUSHR  $2, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V0.B16, V6.B16
	VUSHR  $4, V1.B16, V7.B16
	VUSHR  $4, V4.B16, V8.B16
	VUSHR  $4, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V2.B16, V6.B16
	VUSHR  $4, V3.B16, V7.B16
	VUSHR  $6, V4.B16, V8.B16
	VUSHR  $6, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x4e9094ca // sdot v10.4s, v6.16b, v16.16b
	WORD   $0x4e9194eb // sdot v11.4s, v7.16b, v17.16b
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	ADD    $82, R0
	SUBS   $1, R2
	BNE    q6KQ8SubSDOTblock
	RET

// func q6KQ8SubNEON(w *byte, xq *int8, nb int, out *int32)
TEXT ·q6KQ8SubNEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD xq+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD out+24(FP), R3
	VMOVI $15, V31.B16
	VMOVI $3, V30.B16
	VMOVI $32, V29.B16

q6KQ8SubNEONblock:
	ADD    $128, R0, R5
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND   V31.B16, V0.B16, V6.B16
	VAND   V31.B16, V1.B16, V7.B16
	VAND   V30.B16, V4.B16, V8.B16
	VAND   V30.B16, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VAND   V31.B16, V2.B16, V6.B16
	VAND   V31.B16, V3.B16, V7.B16
	VUSHR  $2, V4.B16, V8.B16
	VUSHR  $2, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V0.B16, V6.B16
	VUSHR  $4, V1.B16, V7.B16
	VUSHR  $4, V4.B16, V8.B16
	VUSHR  $4, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V2.B16, V6.B16
	VUSHR  $4, V3.B16, V7.B16
	VUSHR  $6, V4.B16, V8.B16
	VUSHR  $6, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND   V31.B16, V0.B16, V6.B16
	VAND   V31.B16, V1.B16, V7.B16
	VAND   V30.B16, V4.B16, V8.B16
	VAND   V30.B16, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VAND   V31.B16, V2.B16, V6.B16
	VAND   V31.B16, V3.B16, V7.B16
	VUSHR  $2, V4.B16, V8.B16
	VUSHR  $2, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V0.B16, V6.B16
	VUSHR  $4, V1.B16, V7.B16
	VUSHR  $4, V4.B16, V8.B16
	VUSHR  $4, V5.B16, V9.B16
	VAND   V30.B16, V8.B16, V8.B16
	VAND   V30.B16, V9.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	VUSHR  $4, V2.B16, V6.B16
	VUSHR  $4, V3.B16, V7.B16
	VUSHR  $6, V4.B16, V8.B16
	VUSHR  $6, V5.B16, V9.B16
	VSHL   $4, V8.B16, V8.B16
	VSHL   $4, V9.B16, V9.B16
	VORR   V8.B16, V6.B16, V6.B16
	VORR   V9.B16, V7.B16, V7.B16
	WORD   $0x6e3d84c6 // sub v6.16b, v6.16b, v29.16b
	WORD   $0x6e3d84e7 // sub v7.16b, v7.16b, v29.16b
	VLD1.P 32(R1), [V16.B16, V17.B16]
	VEOR   V10.B16, V10.B16, V10.B16
	VEOR   V11.B16, V11.B16, V11.B16
	WORD   $0x0e30c0d4 // smull v20.8h, v6.8b, v16.8b
	WORD   $0x4e30c0d5 // smull2 v21.8h, v6.16b, v16.16b
	WORD   $0x4e606a8a // sadalp v10.4s, v20.8h
	WORD   $0x4e606aaa // sadalp v10.4s, v21.8h
	WORD   $0x0e31c0f6 // smull v22.8h, v7.8b, v17.8b
	WORD   $0x4e31c0f7 // smull2 v23.8h, v7.16b, v17.16b
	WORD   $0x4e606acb // sadalp v11.4s, v22.8h
	WORD   $0x4e606aeb // sadalp v11.4s, v23.8h
	VADDV  V10.S4, V10
	VADDV  V11.S4, V11
	FMOVS.P F10, 4(R3)
	FMOVS.P F11, 4(R3)
	ADD    $82, R0
	SUBS   $1, R2
	BNE    q6KQ8SubNEONblock
	RET

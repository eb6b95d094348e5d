//go:build amd64 && !purego

#include "textflag.h"

// Vector versions of Exp32, SiLU and GELUTanh (vec.go): the same float32
// operations in the same order, no fused multiply-add, so the results are
// bit-identical. R8 points at vecConsts (rows of 8 equal values, 32 bytes
// apart); Y15 = lower clamp, Y14 = upper clamp, Y13 = 1.

#define C_LO 0
#define C_HI 32
#define C_LOG2E 64
#define C_HALF 96
#define C_C1 128
#define C_C2 160
#define C_P0 192
#define C_P1 224
#define C_P2 256
#define C_P3 288
#define C_P4 320
#define C_P5 352
#define C_ONE 384
#define C_GELUA 416
#define C_GELUK 448
#define C_SIGN 480
#define C_127 512

#define VECCONSTS \
	MOVQ $·vecConsts(SB), R8; \
	VMOVUPS C_LO(R8), Y15; \
	VMOVUPS C_HI(R8), Y14; \
	VMOVUPS C_ONE(R8), Y13

// Y0 = Exp32(Y0); clobbers Y1-Y3. The clamps take x as their second
// (Intel) source so that NaN passes through.
#define EXP8 \
	VMAXPS Y0, Y15, Y0; \
	VMINPS Y0, Y14, Y0; \
	VMULPS C_LOG2E(R8), Y0, Y1; \
	VADDPS C_HALF(R8), Y1, Y1; \
	VROUNDPS $1, Y1, Y1; \
	VMULPS C_C1(R8), Y1, Y2; \
	VSUBPS Y2, Y0, Y0; \
	VMULPS C_C2(R8), Y1, Y2; \
	VSUBPS Y2, Y0, Y0; \
	VMULPS Y0, Y0, Y3; \
	VMOVUPS C_P0(R8), Y2; \
	VMULPS Y0, Y2, Y2; \
	VADDPS C_P1(R8), Y2, Y2; \
	VMULPS Y0, Y2, Y2; \
	VADDPS C_P2(R8), Y2, Y2; \
	VMULPS Y0, Y2, Y2; \
	VADDPS C_P3(R8), Y2, Y2; \
	VMULPS Y0, Y2, Y2; \
	VADDPS C_P4(R8), Y2, Y2; \
	VMULPS Y0, Y2, Y2; \
	VADDPS C_P5(R8), Y2, Y2; \
	VMULPS Y3, Y2, Y2; \
	VADDPS Y0, Y2, Y2; \
	VADDPS Y13, Y2, Y2; \
	VCVTTPS2DQ Y1, Y1; \
	VPADDD C_127(R8), Y1, Y1; \
	VPSLLD $23, Y1, Y1; \
	VMULPS Y1, Y2, Y0

// func expSubAVX2(x *float32, n int, m float32)
// x[i] = Exp32(x[i] - m); n is a multiple of 8.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Y12
	VECCONSTS
	SHRQ $3, CX
	JZ   expdone

exploop:
	VMOVUPS (DI), Y0
	VSUBPS Y12, Y0, Y0
	EXP8
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  exploop

expdone:
	VZEROUPPER
	RET

// func siluAVX2(x *float32, n int)
// x[i] = x[i] / (1 + Exp32(-x[i])); n is a multiple of 8.
TEXT ·siluAVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VECCONSTS
	SHRQ $3, CX
	JZ   siludone

siluloop:
	VMOVUPS (DI), Y4
	VXORPS C_SIGN(R8), Y4, Y0
	EXP8
	VADDPS Y13, Y0, Y0
	VDIVPS Y0, Y4, Y4
	VMOVUPS Y4, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  siluloop

siludone:
	VZEROUPPER
	RET

// func geluAVX2(x *float32, n int)
// x[i] = x[i] / (1 + Exp32(geluArg(x[i]))); n is a multiple of 8.
TEXT ·geluAVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VECCONSTS
	SHRQ $3, CX
	JZ   geludone

geluloop:
	VMOVUPS (DI), Y4
	VMULPS Y4, Y4, Y0
	VMULPS C_GELUA(R8), Y0, Y0
	VMULPS Y4, Y0, Y0
	VADDPS Y4, Y0, Y0
	VMULPS C_GELUK(R8), Y0, Y0
	EXP8
	VADDPS Y13, Y0, Y0
	VDIVPS Y0, Y4, Y4
	VMOVUPS Y4, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  geluloop

geludone:
	VZEROUPPER
	RET

// Element-wise helpers; n is a multiple of 8. Plain multiplies and adds
// (no FMA), matching the portable loops bit for bit.

// func axpyAVX2(dst, x *float32, a float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Y15
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   axpydone

axpyloop:
	VMULPS (SI), Y15, Y0
	VADDPS (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  axpyloop

axpydone:
	VZEROUPPER
	RET

// func addAVX2(dst, a *float32, n int)
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   adddone

addloop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  addloop

adddone:
	VZEROUPPER
	RET

// func mulAVX2(dst, a *float32, n int)
TEXT ·mulAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   muldone

mulloop:
	VMOVUPS (DI), Y0
	VMULPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  mulloop

muldone:
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, s float32, n int)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	VBROADCASTSS s+8(FP), Y15
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   scaledone

scaleloop:
	VMULPS (DI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  scaleloop

scaledone:
	VZEROUPPER
	RET

// func axpyRows64AVX2(dst, a, x *float32, stride, rows int)
// dst[0:64] += a[j]·x[j·stride : j·stride+64] for j < rows in order, each
// row as axpyAVX2 adds it (the product rounded, then the add); dst stays
// in Y0-Y7 across the rows. stride is in floats.
TEXT ·axpyRows64AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), CX
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7

axpyrows64_row:
	VBROADCASTSS (DX), Y15
	VMULPS 0(SI), Y15, Y8
	VMULPS 32(SI), Y15, Y9
	VMULPS 64(SI), Y15, Y10
	VMULPS 96(SI), Y15, Y11
	VADDPS Y8, Y0, Y0
	VADDPS Y9, Y1, Y1
	VADDPS Y10, Y2, Y2
	VADDPS Y11, Y3, Y3
	VMULPS 128(SI), Y15, Y8
	VMULPS 160(SI), Y15, Y9
	VMULPS 192(SI), Y15, Y10
	VMULPS 224(SI), Y15, Y11
	VADDPS Y8, Y4, Y4
	VADDPS Y9, Y5, Y5
	VADDPS Y10, Y6, Y6
	VADDPS Y11, Y7, Y7
	ADDQ $4, DX
	ADDQ R9, SI
	DECQ CX
	JNZ  axpyrows64_row

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	VZEROUPPER
	RET

// func axpyRows8AVX2(dst, a, x *float32, stride, rows int)
// axpyRows64AVX2 for 8 elements.
TEXT ·axpyRows8AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), CX
	VMOVUPS 0(DI), Y0

axpyrows8_row:
	VBROADCASTSS (DX), Y15
	VMULPS 0(SI), Y15, Y8
	VADDPS Y8, Y0, Y0
	ADDQ $4, DX
	ADDQ R9, SI
	DECQ CX
	JNZ  axpyrows8_row

	VMOVUPS Y0, 0(DI)
	VZEROUPPER
	RET

// func allFiniteAVX2(x *float32, n int) bool
// Whether no element of x[0:n] (n a multiple of 32) has an all-ones
// exponent (NaN or ±Inf): 32 floats a step, their exponent fields
// compared with all ones and the matches or-ed together.
TEXT ·allFiniteAVX2(SB), NOSPLIT, $0-17
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0x7f800000, AX
	MOVL AX, X15
	VPBROADCASTD X15, Y15
	VPXOR Y14, Y14, Y14

finite_loop:
	VPAND 0(SI), Y15, Y0
	VPAND 32(SI), Y15, Y1
	VPAND 64(SI), Y15, Y2
	VPAND 96(SI), Y15, Y3
	VPCMPEQD Y15, Y0, Y0
	VPCMPEQD Y15, Y1, Y1
	VPCMPEQD Y15, Y2, Y2
	VPCMPEQD Y15, Y3, Y3
	VPOR Y1, Y0, Y0
	VPOR Y3, Y2, Y2
	VPOR Y2, Y0, Y0
	VPOR Y0, Y14, Y14
	ADDQ $128, SI
	SUBQ $32, CX
	JNZ  finite_loop

	VPTEST Y14, Y14
	SETEQ AX
	VZEROUPPER
	MOVB AX, ret+16(FP)
	RET

// Z0 = Exp32(Z0) on 16 lanes, EXP8's operations in its order (bit for bit
// the same); clobbers Z1-Z3. Z15 = lower clamp, Z14 = upper clamp, Z13 = 1
// (VECCONSTS16); the other constants are broadcast from vecConsts' rows.
#define EXP16 \
	VMAXPS Z0, Z15, Z0; \
	VMINPS Z0, Z14, Z0; \
	VMULPS.BCST C_LOG2E(R8), Z0, Z1; \
	VADDPS.BCST C_HALF(R8), Z1, Z1; \
	VRNDSCALEPS $1, Z1, Z1; \
	VMULPS.BCST C_C1(R8), Z1, Z2; \
	VSUBPS Z2, Z0, Z0; \
	VMULPS.BCST C_C2(R8), Z1, Z2; \
	VSUBPS Z2, Z0, Z0; \
	VMULPS Z0, Z0, Z3; \
	VBROADCASTSS C_P0(R8), Z2; \
	VMULPS Z0, Z2, Z2; \
	VADDPS.BCST C_P1(R8), Z2, Z2; \
	VMULPS Z0, Z2, Z2; \
	VADDPS.BCST C_P2(R8), Z2, Z2; \
	VMULPS Z0, Z2, Z2; \
	VADDPS.BCST C_P3(R8), Z2, Z2; \
	VMULPS Z0, Z2, Z2; \
	VADDPS.BCST C_P4(R8), Z2, Z2; \
	VMULPS Z0, Z2, Z2; \
	VADDPS.BCST C_P5(R8), Z2, Z2; \
	VMULPS Z3, Z2, Z2; \
	VADDPS Z0, Z2, Z2; \
	VADDPS Z13, Z2, Z2; \
	VCVTTPS2DQ Z1, Z1; \
	VPADDD.BCST C_127(R8), Z1, Z1; \
	VPSLLD $23, Z1, Z1; \
	VMULPS Z1, Z2, Z0

#define VECCONSTS16 \
	MOVQ $·vecConsts(SB), R8; \
	VBROADCASTSS C_LO(R8), Z15; \
	VBROADCASTSS C_HI(R8), Z14; \
	VBROADCASTSS C_ONE(R8), Z13

// func siluAVX512(x *float32, n int)
// siluAVX2 on 16 lanes; n is a multiple of 16.
TEXT ·siluAVX512(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VECCONSTS16
	SHRQ $4, CX
	JZ   silu16done

silu16loop:
	VMOVUPS (DI), Z4
	VPXORD.BCST C_SIGN(R8), Z4, Z0
	EXP16
	VADDPS Z13, Z0, Z0
	VDIVPS Z0, Z4, Z4
	VMOVUPS Z4, (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ  silu16loop

silu16done:
	VZEROUPPER
	RET

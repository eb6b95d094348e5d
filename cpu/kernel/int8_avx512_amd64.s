//go:build amd64 && !purego

#include "textflag.h"

// 512-bit Int8-mode dots (levels AVX512 and AVX512VNNI): one weight row
// against the quantized activation, two 32-element blocks per step.
// Arguments: w the row, xq the int8 activation, xd8 the activation block
// scales repeated 8 times, xo the per-block integer offset (8 int32 per
// block, the first -8·Σq for q4_0 or -128·Σq for q8_0, the rest 0), nb
// the number of blocks.
//
// q4_0: the nibbles are the unsigned operand (w+8), so Σ(w+8)·x − 8·Σx =
// Σw·x. q8_0 with VPDPBUSD: w XOR 0x80 is w+128 unsigned, so the offset
// is −128·Σx. q8_0 without VNNI (VPMADDUBSW saturates at 16 bits): |w|
// times x with w's sign, as the AVX2 kernel does with VPSIGNB.
//
// Registers: Z15 0x0f bytes, Z14 int16 ones, Z13 the nibble shift counts,
// Z12 0x80 bytes, Z9 zero, R11 the f16 → f32 table; Z0, Z1 accumulators.

#define CONSTS512 \
	MOVQ ·f16Table(SB), R11; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z15; \
	MOVL $0x00010001, AX; \
	VPBROADCASTD AX, Z14; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z12; \
	MOVL $4, AX; \
	VPBROADCASTD AX, Y13; \
	VPXORD X9, X9, X9; \
	VINSERTI32X4 $0, X9, Y13, Y13; \
	VINSERTI64X4 $1, Y13, Z13, Z13; \
	VPXORD Z9, Z9, Z9; \
	VXORPS Z0, Z0, Z0; \
	VXORPS Z1, Z1, Z1

// Two blocks' scales dw·xd into Z4 (block stride STRIDE).
#define SCALE2(STRIDE) \
	MOVWLZX (SI), AX; \
	MOVWLZX STRIDE(SI), BX; \
	VBROADCASTSS (R11)(AX*4), Y4; \
	VBROADCASTSS (R11)(BX*4), Y8; \
	VINSERTF64X4 $1, Y8, Z4, Z4; \
	VMULPS (R10), Z4, Z4

// Fold Z1 into Z0 and the upper half of Z0 into Y0.
#define FOLD512 \
	VADDPS Z1, Z0, Z0; \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS Y1, Y0, Y0

#define HSUMY0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

#define PF512 1024

// q4_0 nibbles of two blocks into Z5 (unsigned bytes 0..15).
#define Q4LOAD2 \
	VBROADCASTI32X4 2(SI), Y5; \
	VBROADCASTI32X4 20(SI), Y6; \
	VINSERTI64X4 $1, Y6, Z5, Z5; \
	VPSRLVD Z13, Z5, Z5; \
	VPANDD Z15, Z5, Z5

#define Q4LOAD1 \
	VBROADCASTI32X4 2(SI), Y5; \
	VPSRLVD Y13, Y5, Y5; \
	VPANDD Y15, Y5, Y5

// Integer dots of the unsigned weight bytes (Z5) with the int8
// activation, plus the offset, into Z7.
#define Q4DOTVNNIZ \
	VMOVDQU32 (R12), Z7; \
	VPDPBUSD (DI), Z5, Z7

#define Q4DOTVNNIY \
	VMOVDQU32 (R12), Y7; \
	VPDPBUSD (DI), Y5, Y7

#define Q4DOTBWZ \
	VPMADDUBSW (DI), Z5, Z7; \
	VPMADDWD Z14, Z7, Z7; \
	VPADDD (R12), Z7, Z7

#define Q4DOTBWY \
	VPMADDUBSW (DI), Y5, Y7; \
	VPMADDWD Y14, Y7, Y7; \
	VPADDD (R12), Y7, Y7

// q8_0 weights of two blocks into Z5 (signed bytes).
#define Q8LOAD2 \
	VMOVDQU8 2(SI), Y5; \
	VINSERTI64X4 $1, 36(SI), Z5, Z5

#define Q8LOAD1 \
	VMOVDQU8 2(SI), Y5

#define Q8DOTVNNIZ \
	VPXORD Z12, Z5, Z5; \
	VMOVDQU32 (R12), Z7; \
	VPDPBUSD (DI), Z5, Z7

#define Q8DOTVNNIY \
	VPXORD Y12, Y5, Y5; \
	VMOVDQU32 (R12), Y7; \
	VPDPBUSD (DI), Y5, Y7

#define Q8DOTBWZ \
	VPMOVB2M Z5, K1; \
	VPABSB Z5, Z5; \
	VMOVDQU8 (DI), Z6; \
	VPSUBB Z6, Z9, K1, Z6; \
	VPMADDUBSW Z6, Z5, Z7; \
	VPMADDWD Z14, Z7, Z7

#define Q8DOTBWY \
	VPMOVB2M Y5, K1; \
	VPABSB Y5, Y5; \
	VMOVDQU8 (DI), Y6; \
	VPSUBB Y6, Y9, K1, Y6; \
	VPMADDUBSW Y6, Y5, Y7; \
	VPMADDWD Y14, Y7, Y7

// One block's result (Y7) scaled into Y0.
#define TAIL1 \
	VCVTDQ2PS Y7, Y7; \
	MOVWLZX (SI), AX; \
	VBROADCASTSS (R11)(AX*4), Y4; \
	VMULPS (R10), Y4, Y4; \
	VFMADD231PS Y7, Y4, Y0

// Two blocks' results (Z7) scaled into ACC.
#define ACC2(STRIDE, ACC) \
	VCVTDQ2PS Z7, Z7; \
	SCALE2(STRIDE); \
	VFMADD231PS Z7, Z4, ACC

#define ADV(WB) \
	ADDQ $WB, SI; \
	ADDQ $64, DI; \
	ADDQ $64, R10; \
	ADDQ $64, R12

#define ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ xq+8(FP), DI; \
	MOVQ xd8+16(FP), R10; \
	MOVQ xo+24(FP), R12; \
	MOVQ nb+32(FP), CX

// func dotQ4_0Q8VNNI(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32
TEXT ·dotQ4_0Q8VNNI(SB), NOSPLIT, $0-44
	ARGS
	CONSTS512
	CMPQ CX, $4
	JLT  dotQ4_0Q8VNNI_2

dotQ4_0Q8VNNI_4:
	PREFETCHT0 PF512(SI)
	Q4LOAD2
	Q4DOTVNNIZ
	ACC2(18, Z0)
	ADV(36)
	Q4LOAD2
	Q4DOTVNNIZ
	ACC2(18, Z1)
	ADV(36)
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  dotQ4_0Q8VNNI_4

dotQ4_0Q8VNNI_2:
	CMPQ CX, $2
	JLT  dotQ4_0Q8VNNI_1
	Q4LOAD2
	Q4DOTVNNIZ
	ACC2(18, Z0)
	ADV(36)
	SUBQ $2, CX

dotQ4_0Q8VNNI_1:
	FOLD512
	TESTQ CX, CX
	JZ   dotQ4_0Q8VNNI_0
	Q4LOAD1
	Q4DOTVNNIY
	TAIL1

dotQ4_0Q8VNNI_0:
	HSUMY0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func dotQ4_0Q8AVX512(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32
TEXT ·dotQ4_0Q8AVX512(SB), NOSPLIT, $0-44
	ARGS
	CONSTS512
	CMPQ CX, $4
	JLT  dotQ4_0Q8AVX512_2

dotQ4_0Q8AVX512_4:
	PREFETCHT0 PF512(SI)
	Q4LOAD2
	Q4DOTBWZ
	ACC2(18, Z0)
	ADV(36)
	Q4LOAD2
	Q4DOTBWZ
	ACC2(18, Z1)
	ADV(36)
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  dotQ4_0Q8AVX512_4

dotQ4_0Q8AVX512_2:
	CMPQ CX, $2
	JLT  dotQ4_0Q8AVX512_1
	Q4LOAD2
	Q4DOTBWZ
	ACC2(18, Z0)
	ADV(36)
	SUBQ $2, CX

dotQ4_0Q8AVX512_1:
	FOLD512
	TESTQ CX, CX
	JZ   dotQ4_0Q8AVX512_0
	Q4LOAD1
	Q4DOTBWY
	TAIL1

dotQ4_0Q8AVX512_0:
	HSUMY0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func dotQ8_0Q8VNNI(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32
TEXT ·dotQ8_0Q8VNNI(SB), NOSPLIT, $0-44
	ARGS
	CONSTS512
	CMPQ CX, $4
	JLT  dotQ8_0Q8VNNI_2

dotQ8_0Q8VNNI_4:
	PREFETCHT0 PF512(SI)
	PREFETCHT0 (PF512+64)(SI)
	Q8LOAD2
	Q8DOTVNNIZ
	ACC2(34, Z0)
	ADV(68)
	Q8LOAD2
	Q8DOTVNNIZ
	ACC2(34, Z1)
	ADV(68)
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  dotQ8_0Q8VNNI_4

dotQ8_0Q8VNNI_2:
	CMPQ CX, $2
	JLT  dotQ8_0Q8VNNI_1
	Q8LOAD2
	Q8DOTVNNIZ
	ACC2(34, Z0)
	ADV(68)
	SUBQ $2, CX

dotQ8_0Q8VNNI_1:
	FOLD512
	TESTQ CX, CX
	JZ   dotQ8_0Q8VNNI_0
	Q8LOAD1
	Q8DOTVNNIY
	TAIL1

dotQ8_0Q8VNNI_0:
	HSUMY0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func dotQ8_0Q8AVX512(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32
TEXT ·dotQ8_0Q8AVX512(SB), NOSPLIT, $0-44
	ARGS
	CONSTS512
	CMPQ CX, $4
	JLT  dotQ8_0Q8AVX512_2

dotQ8_0Q8AVX512_4:
	PREFETCHT0 PF512(SI)
	PREFETCHT0 (PF512+64)(SI)
	Q8LOAD2
	Q8DOTBWZ
	ACC2(34, Z0)
	ADV(68)
	Q8LOAD2
	Q8DOTBWZ
	ACC2(34, Z1)
	ADV(68)
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  dotQ8_0Q8AVX512_4

dotQ8_0Q8AVX512_2:
	CMPQ CX, $2
	JLT  dotQ8_0Q8AVX512_1
	Q8LOAD2
	Q8DOTBWZ
	ACC2(34, Z0)
	ADV(68)
	SUBQ $2, CX

dotQ8_0Q8AVX512_1:
	FOLD512
	TESTQ CX, CX
	JZ   dotQ8_0Q8AVX512_0
	Q8LOAD1
	Q8DOTBWY
	TAIL1

dotQ8_0Q8AVX512_0:
	HSUMY0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET


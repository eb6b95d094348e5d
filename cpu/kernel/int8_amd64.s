//go:build amd64 && !purego

#include "textflag.h"

// Int8-mode dots: weights against an activation quantized to int8 blocks
// (xq, scales xd, xs = xd·Σxq). Y15 = 0x0f bytes, Y14 = int16 ones,
// R11 = f16 → f32 table.

#define Q4Q8BLOCK(ACC, CORR) \
	MOVWLZX (SI), AX; \
	VBROADCASTSS (R11)(AX*4), Y4; \
	VMOVDQU 2(SI), X5; \
	VPSRLW $4, X5, X6; \
	VINSERTI128 $1, X6, Y5, Y5; \
	VPAND Y15, Y5, Y5; \
	VPMADDUBSW (DI), Y5, Y6; \
	VPMADDWD Y14, Y6, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS (R10), Y7; \
	VMULPS Y7, Y4, Y7; \
	VFMADD231PS Y6, Y7, ACC; \
	VBROADCASTSS (R12), Y8; \
	VFMADD231PS Y8, Y4, CORR

#define INT8CONSTS \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x00010001, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVQ ·f16Table(SB), R11

#define HSUM0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// func dotQ4_0Q8AVX2(w *byte, xq *int8, xd, xs *float32, nb int) float32
TEXT ·dotQ4_0Q8AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), R10
	MOVQ xs+24(FP), R12
	MOVQ nb+32(FP), CX
	INT8CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	CMPQ CX, $2
	JLT  q4q8tail

q4q8loop:
	Q4Q8BLOCK(Y0, Y10)
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $4, R12
	Q4Q8BLOCK(Y2, Y11)
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $4, R12
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q4q8loop

q4q8tail:
	TESTQ CX, CX
	JZ    q4q8done
	Q4Q8BLOCK(Y0, Y10)

q4q8done:
	VADDPS Y2, Y0, Y0
	VADDPS Y11, Y10, Y10
	VSUBPS Y10, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

#define Q8Q8BLOCK(ACC) \
	MOVWLZX (SI), AX; \
	VBROADCASTSS (R11)(AX*4), Y4; \
	VMOVDQU 2(SI), Y5; \
	VMOVDQU (DI), Y6; \
	VPSIGNB Y5, Y6, Y6; \
	VPABSB Y5, Y5; \
	VPMADDUBSW Y6, Y5, Y7; \
	VPMADDWD Y14, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	VBROADCASTSS (R10), Y8; \
	VMULPS Y8, Y4, Y8; \
	VFMADD231PS Y7, Y8, ACC

// func dotQ8_0Q8AVX2(w *byte, xq *int8, xd *float32, nb int) float32
TEXT ·dotQ8_0Q8AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), R10
	MOVQ nb+24(FP), CX
	INT8CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	CMPQ CX, $2
	JLT  q8q8tail

q8q8loop:
	Q8Q8BLOCK(Y0)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R10
	Q8Q8BLOCK(Y2)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R10
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q8q8loop

q8q8tail:
	TESTQ CX, CX
	JZ    q8q8done
	Q8Q8BLOCK(Y0)

q8q8done:
	VADDPS Y2, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// Four-row Int8 dots: rows at w, w+rb, w+2rb, w+3rb share each activation
// block, which stays in registers (Y10 = xq block, Y11 = its q4_0
// correction, Y12 = broadcast xd). Rows alternate between two temporary
// sets so that consecutive rows are independent. BX = 0, R8 = rb (set by the caller),
// R13 = 2rb, R9 = 3rb index the rows from SI.

#define X4REGS \
	LEAQ (R8)(R8*1), R13; \
	LEAQ (R8)(R8*2), R9; \
	XORQ BX, BX; \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x00010001, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVQ ·f16Table(SB), R11; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

// Sum each of Y0..Y3 into one float and store the four at DX.
#define X4STORE \
	VHADDPS Y1, Y0, Y0; \
	VHADDPS Y3, Y2, Y2; \
	VHADDPS Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVUPS X0, (DX); \
	VZEROUPPER

// Software prefetch distance in bytes ahead of each row.
#define PFDIST 2048

// The scale product dw·xd of the block at SI+IDX into YA.
#define BSCALE(IDX, XA, YA) \
	MOVWLZX (SI)(IDX*1), AX; \
	VBROADCASTSS (R11)(AX*4), YA; \
	VMULPS Y12, YA, YA

#define Q4X4ROW(IDX, ACC, XA, YA, XB, YB, XC) \
	PREFETCHT0 PFDIST(SI)(IDX*1); \
	BSCALE(IDX, XA, YA); \
	VBROADCASTI128 2(SI)(IDX*1), YB; \
	VPSRLVD Y13, YB, YB; \
	VPAND Y15, YB, YB; \
	VPMADDUBSW Y10, YB, YB; \
	VPMADDWD Y14, YB, YB; \
	VPSUBD Y11, YB, YB; \
	VCVTDQ2PS YB, YB; \
	VFMADD231PS YB, YA, ACC

// func dotQ4_0Q8x4AVX2(w *byte, rb int, xq *int8, xd *float32, xc *int32, nb int, out *[4]float32)
// xc holds per block eight int32 whose sum is 8·Σxq (the -8 offset).
TEXT ·dotQ4_0Q8x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), R8
	X4REGS
	// Y13: shift counts 0 (low lane: low nibbles) and 4 (high lane).
	VPXOR Y13, Y13, Y13
	MOVL $4, AX
	VMOVD AX, X9
	VPBROADCASTD X9, X9
	VINSERTI128 $1, X9, Y13, Y13
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), R10
	MOVQ xc+32(FP), R12
	MOVQ nb+40(FP), CX
	MOVQ out+48(FP), DX
	TESTQ CX, CX
	JZ   q4x4done

q4x4loop:
	VMOVDQU (DI), Y10
	VMOVDQU (R12), Y11
	VBROADCASTSS (R10), Y12
	Q4X4ROW(BX, Y0, X4, Y4, X5, Y5, X6)
	Q4X4ROW(R8, Y1, X7, Y7, X8, Y8, X9)
	Q4X4ROW(R13, Y2, X4, Y4, X5, Y5, X6)
	Q4X4ROW(R9, Y3, X7, Y7, X8, Y8, X9)
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $32, R12
	DECQ CX
	JNZ  q4x4loop

q4x4done:
	X4STORE
	RET

#define Q8X4ROW(IDX, ACC, XA, YA, YB, YC) \
	PREFETCHT0 PFDIST(SI)(IDX*1); \
	BSCALE(IDX, XA, YA); \
	VMOVDQU 2(SI)(IDX*1), YB; \
	VPSIGNB YB, Y10, YC; \
	VPABSB YB, YB; \
	VPMADDUBSW YC, YB, YB; \
	VPMADDWD Y14, YB, YB; \
	VCVTDQ2PS YB, YB; \
	VFMADD231PS YB, YA, ACC

// func dotQ8_0Q8x4AVX2(w *byte, rb int, xq *int8, xd *float32, nb int, out *[4]float32)
TEXT ·dotQ8_0Q8x4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), R8
	X4REGS
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), R10
	MOVQ nb+32(FP), CX
	MOVQ out+40(FP), DX
	TESTQ CX, CX
	JZ   q8x4done

q8x4loop:
	VMOVDQU (DI), Y10
	VBROADCASTSS (R10), Y12
	Q8X4ROW(BX, Y0, X4, Y4, Y5, Y6)
	Q8X4ROW(R8, Y1, X7, Y7, Y8, Y9)
	Q8X4ROW(R13, Y2, X4, Y4, Y5, Y6)
	Q8X4ROW(R9, Y3, X7, Y7, Y8, Y9)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R10
	DECQ CX
	JNZ  q8x4loop

q8x4done:
	X4STORE
	RET

//go:build amd64 && !purego

#include "textflag.h"

// Int8-mode dots of the lowbit GGUF codecs (lowbit_int8.go defines the
// arithmetic): one weight row against the int8 activation, 256-bit. Each
// function exists twice: …AVX2 (VPMADDUBSW + VPMADDWD) and …VNNI
// (VPDPBUSD on ymm, AVX-512 VNNI + VL); both give the same integer lanes,
// and the float operations are those of dotLowbitInt8, in its order.
//
// func(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32
// nb counts 32-blocks (a multiple of 8 for the K and iq4_xs codecs).
//
// Registers: SI row, DI xq, R10 xd, R12 xs, R13 hs, CX count, R11 the
// f16 → f32 table; Y0 the eight lane sums acc, X3 the scalar min sum m,
// Y2 the min lanes mv; Y15 0x0f bytes, Y14 int16 ones, Y13 the nibble
// shift counts (0 in the low lane, 4 in the high lane); Y4 the block
// scale, Y5 the weight bytes, Y7 the integer lanes; Y1 and Y6 scratch.

DATA ·lbShuf+0(SB)/8, $0x0000000000000000
DATA ·lbShuf+8(SB)/8, $0x0101010101010101
DATA ·lbShuf+16(SB)/8, $0x0202020202020202
DATA ·lbShuf+24(SB)/8, $0x0303030303030303
GLOBL ·lbShuf(SB), RODATA|NOPTR, $32

DATA ·lbBits+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA ·lbBits+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA ·lbBits+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA ·lbBits+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL ·lbBits(SB), RODATA|NOPTR, $32

// 16-byte code books (iq4 and mxfp4), broadcast to both lanes.
DATA ·lbIQ4+0(SB)/8, $0xf6eaddcfbfad9881
DATA ·lbIQ4+8(SB)/8, $0x7159453526190d01
GLOBL ·lbIQ4(SB), RODATA|NOPTR, $16

DATA ·lbMXFP4+0(SB)/8, $0x0c08060403020100
DATA ·lbMXFP4+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL ·lbMXFP4(SB), RODATA|NOPTR, $16

#define ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ xq+8(FP), DI; \
	MOVQ xd+16(FP), R10; \
	MOVQ xs+24(FP), R12; \
	MOVQ hs+32(FP), R13; \
	MOVQ nb+40(FP), CX; \
	MOVQ ·f16Table(SB), R11; \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x00010001, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VPXOR Y13, Y13, Y13; \
	MOVL $4, AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, X6; \
	VINSERTI128 $1, X6, Y13, Y13; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y2, Y2, Y2; \
	VXORPS X3, X3, X3

// Y = the dword C in every lane.
#define BCAST(C, X, Y) \
	MOVL C, AX; \
	VMOVD AX, X; \
	VPBROADCASTD X, Y

// (hsum(acc) + m) + hsum(mv), hsum(a) = ((a0+a4) + (a2+a6)) + ((a1+a5) +
// (a3+a7)).
#define FINISH \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0; \
	VADDSS X3, X0, X0; \
	VEXTRACTF128 $1, Y2, X1; \
	VADDPS X1, X2, X2; \
	VMOVHLPS X2, X2, X1; \
	VADDPS X1, X2, X2; \
	VMOVSHDUP X2, X1; \
	VADDSS X1, X2, X2; \
	VADDSS X2, X0, X0; \
	VZEROUPPER; \
	MOVSS X0, ret+48(FP); \
	RET

// Integer lanes Y7 of the weight bytes Y5 (unsigned: DOTU; signed, |w| <=
// 127: DOTS, as |w| times x with w's sign) with the activation at X.
#define DOTU_AVX2(X) \
	VPMADDUBSW X, Y5, Y7; \
	VPMADDWD Y14, Y7, Y7

#define DOTU_VNNI(X) \
	VPXOR Y7, Y7, Y7; \
	VPDPBUSD X, Y5, Y7

#define DOTS_AVX2(X) \
	VMOVDQU X, Y6; \
	VPSIGNB Y5, Y6, Y6; \
	VPABSB Y5, Y5; \
	VPMADDUBSW Y6, Y5, Y7; \
	VPMADDWD Y14, Y7, Y7

#define DOTS_VNNI(X) \
	VMOVDQU X, Y6; \
	VPSIGNB Y5, Y6, Y6; \
	VPABSB Y5, Y5; \
	VPXOR Y7, Y7, Y7; \
	VPDPBUSD Y6, Y5, Y7

// acc += float(lanes)·scale.
#define ACC \
	VCVTDQ2PS Y7, Y7; \
	VMULPS Y4, Y7, Y7; \
	VADDPS Y7, Y0, Y0

// Y4 = f16 at OFF(SI) times the block's dx (at (R10)), broadcast.
#define F16SCALE(OFF) \
	MOVWLZX OFF(SI), AX; \
	VMOVSS (R11)(AX*4), X4; \
	VMULSS (R10), X4, X4; \
	VBROADCASTSS X4, Y4

// The 16 nibble bytes at OFF(SI) as 32 bytes 0..15 (low nibbles first).
#define NIBBLES(OFF) \
	VBROADCASTI128 OFF(SI), Y5; \
	VPSRLVD Y13, Y5, Y5; \
	VPAND Y15, Y5, Y5

// Y6 = 0xff in byte k where bit k of the 32 bits at OFF(SI) is set
// (Y10 = lbShuf, Y11 = lbBits, Y8 = all ones).
#define BITS32(OFF) \
	VPBROADCASTD OFF(SI), Y6; \
	VPSHUFB Y10, Y6, Y6; \
	VPOR Y11, Y6, Y6; \
	VPCMPEQB Y8, Y6, Y6

// m += f16 at OFF(SI) times xs[b].
#define FMIN(OFF) \
	MOVWLZX OFF(SI), AX; \
	VMOVSS (R11)(AX*4), X6; \
	VMULSS (R12), X6, X6; \
	VADDSS X6, X3, X3

// Every loop below prefetches the lines of the row 4 KiB ahead of the
// block it decodes (rows are contiguous, so past a row's end it fetches
// the next row's), as the packed decode kernels do.

// A codec of 32-blocks of BB bytes: BLK(DOT) computes Y4 and Y7 of the
// block at SI. Y12 = the dword C12 in every lane, Y9 = the iq4 code book.
#define FUNC32(NAME, BLK, DOT, BB, C12) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	VPCMPEQB Y8, Y8, Y8; \
	VMOVDQU ·lbShuf(SB), Y10; \
	VMOVDQU ·lbBits(SB), Y11; \
	BCAST(C12, X12, Y12); \
	VBROADCASTI128 ·lbIQ4(SB), Y9; \
	TESTQ CX, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	BLK(DOT); \
	ACC; \
	ADDQ $BB, SI; \
	ADDQ $32, DI; \
	ADDQ $4, R10; \
	ADDQ $4, R12; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

// q4_1: f16 d, f16 m, nibbles; unsigned weights, min m·xs.
#define Q4_1BLK(DOT) \
	F16SCALE(0); \
	NIBBLES(4); \
	DOT((DI)); \
	FMIN(2)

// q5_0: f16 d, 32 fifth bits, nibbles; w = q | (bit ? 0 : 0xf0) as int8
// (Y12 = 0xf0 bytes).
#define Q5_0BLK(DOT) \
	F16SCALE(0); \
	NIBBLES(6); \
	BITS32(2); \
	VPANDN Y12, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	DOT((DI))

// q5_1: f16 d, f16 m, 32 fifth bits, nibbles; unsigned weights (Y12 =
// 0x10 bytes).
#define Q5_1BLK(DOT) \
	F16SCALE(0); \
	NIBBLES(8); \
	BITS32(4); \
	VPAND Y12, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	DOT((DI)); \
	FMIN(2)

// iq4_nl: f16 d, nibbles into the code book.
#define IQ4_NLBLK(DOT) \
	F16SCALE(0); \
	NIBBLES(2); \
	VPSHUFB Y5, Y9, Y5; \
	DOT((DI))

FUNC32(·dotQ4_1I8AVX2, Q4_1BLK, DOTU_AVX2, 20, $0)
FUNC32(·dotQ4_1I8VNNI, Q4_1BLK, DOTU_VNNI, 20, $0)
FUNC32(·dotQ5_0I8AVX2, Q5_0BLK, DOTS_AVX2, 22, $0xf0f0f0f0)
FUNC32(·dotQ5_0I8VNNI, Q5_0BLK, DOTS_VNNI, 22, $0xf0f0f0f0)
FUNC32(·dotQ5_1I8AVX2, Q5_1BLK, DOTU_AVX2, 24, $0x10101010)
FUNC32(·dotQ5_1I8VNNI, Q5_1BLK, DOTU_VNNI, 24, $0x10101010)
FUNC32(·dotIQ4_NLI8AVX2, IQ4_NLBLK, DOTS_AVX2, 18, $0)
FUNC32(·dotIQ4_NLI8VNNI, IQ4_NLBLK, DOTS_VNNI, 18, $0)

// mxfp4: e8m0 exponent (R9: the halved-scale table), nibbles into the
// doubled e2m1 code book (Y12).
#define MXFP4FUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	MOVQ ·e8m0HalfTable(SB), R9; \
	VBROADCASTI128 ·lbMXFP4(SB), Y12; \
	TESTQ CX, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	MOVBLZX (SI), AX; \
	VMOVSS (R9)(AX*4), X4; \
	VMULSS (R10), X4, X4; \
	VBROADCASTSS X4, Y4; \
	NIBBLES(1); \
	VPSHUFB Y5, Y12, Y5; \
	DOT((DI)); \
	ACC; \
	ADDQ $17, SI; \
	ADDQ $32, DI; \
	ADDQ $4, R10; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

MXFP4FUNC(·dotMXFP4I8AVX2, DOTS_AVX2)
MXFP4FUNC(·dotMXFP4I8VNNI, DOTS_VNNI)

// Super-block codecs: the loop runs over super-blocks (CX = nb/8) and
// unrolls their eight 32-blocks K; XOFF = 32K. Each super-block first
// computes, eight or sixteen at a time, the scales dw·dx of its blocks
// (or half blocks) into the frame at FOFF = 4K (8K for half blocks) and,
// for q2_K and q5_K, adds its eight min terms to mv. X11 = d, X12 = dmin.

DATA ·lbPairLo+0(SB)/8, $0x0000000000000000
DATA ·lbPairLo+8(SB)/8, $0x0000000100000001
DATA ·lbPairLo+16(SB)/8, $0x0000000200000002
DATA ·lbPairLo+24(SB)/8, $0x0000000300000003
GLOBL ·lbPairLo(SB), RODATA|NOPTR, $32

DATA ·lbPairHi+0(SB)/8, $0x0000000400000004
DATA ·lbPairHi+8(SB)/8, $0x0000000500000005
DATA ·lbPairHi+16(SB)/8, $0x0000000600000006
DATA ·lbPairHi+24(SB)/8, $0x0000000700000007
GLOBL ·lbPairHi(SB), RODATA|NOPTR, $32

DATA ·lbHalfIdx+0(SB)/8, $0x0000000000000000
DATA ·lbHalfIdx+8(SB)/8, $0x0000000000000000
DATA ·lbHalfIdx+16(SB)/8, $0x0000000100000001
DATA ·lbHalfIdx+24(SB)/8, $0x0000000100000001
GLOBL ·lbHalfIdx(SB), RODATA|NOPTR, $32

DATA ·lbShift2+0(SB)/8, $0x0000000200000000
DATA ·lbShift2+8(SB)/8, $0x0000000600000004
DATA ·lbShift2+16(SB)/8, $0x0000000a00000008
DATA ·lbShift2+24(SB)/8, $0x0000000e0000000c
GLOBL ·lbShift2(SB), RODATA|NOPTR, $32

// Sixteen half-block scales: the signed dwords Y6 (halves 0..7) and Y1
// (8..15) times d times dx of their block, into 0(SP) and 32(SP).
#define HALFSCALES \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y1, Y1; \
	VBROADCASTSS X11, Y7; \
	VMULPS Y7, Y6, Y6; \
	VMULPS Y7, Y1, Y1; \
	VMOVDQU ·lbPairLo(SB), Y7; \
	VPERMPS (R10), Y7, Y7; \
	VMULPS Y7, Y6, Y6; \
	VMOVUPS Y6, (SP); \
	VMOVDQU ·lbPairHi(SB), Y7; \
	VPERMPS (R10), Y7, Y7; \
	VMULPS Y7, Y1, Y1; \
	VMOVUPS Y1, 32(SP)

// mv += float(dmin·dx)·float(Y6), Y6 the eight negated integer min sums.
#define MINLANES \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS X12, Y1; \
	VMULPS (R10), Y1, Y1; \
	VMULPS Y1, Y6, Y6; \
	VADDPS Y6, Y2, Y2

// Pairwise sums of the dwords Y6 (0..7) and Y1 (8..15) in order, into Y6.
#define PAIRSUM \
	VPHADDD Y1, Y6, Y6; \
	VPERMQ $0xD8, Y6, Y6

// q5_K (176 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 32
// bytes of fifth bits, 128 of nibbles). X10 = the eight scales then the
// eight mins (ggml's utmp unpacking); Y9 = the fifth bits, Y8 = the bit of
// block K in every byte, Y13 = 0x10 bytes.
// X11 = d, X12 = dmin, X10 = the eight scales then the eight mins.
#define Q5KSCALES \
	MOVWLZX (SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	MOVWLZX 2(SI), AX; \
	VMOVSS (R11)(AX*4), X12; \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL DX, R8; \
	SHRL $4, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL BX, R9; \
	SHRL $6, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	ANDL $0x0f0f0f0f, DX; \
	MOVL AX, R9; \
	SHRL $6, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, DX; \
	ANDL $0x3f3f3f3f, BX; \
	ANDL $0x3f3f3f3f, AX; \
	VMOVD AX, X10; \
	VPINSRD $1, DX, X10, X10; \
	VPINSRD $2, BX, X10, X10; \
	VPINSRD $3, R8, X10, X10

#define Q5KHEAD \
	Q5KSCALES; \
	VPMOVZXBD X10, Y1; \
	VCVTDQ2PS Y1, Y1; \
	VBROADCASTSS X11, Y6; \
	VMULPS Y6, Y1, Y1; \
	VMULPS (R10), Y1, Y1; \
	VMOVUPS Y1, (SP); \
	VPSRLDQ $8, X10, X6; \
	VPMOVZXBD X6, Y6; \
	VMOVDQU (R13), Y1; \
	VPHADDD 32(R13), Y1, Y1; \
	VPERMQ $0xD8, Y1, Y1; \
	VPMULLD Y1, Y6, Y6; \
	VPXOR Y1, Y1, Y1; \
	VPSUBD Y6, Y1, Y6; \
	MINLANES; \
	VMOVDQU 16(SI), Y9; \
	BCAST($0x01010101, X8, Y8)

// Y5 = the weights of block K: nibbles at QOFF shifted by SHIFT, fifth
// bits from Y9 under the mask Y8 (then moved to the next block's bit).
#define Q5KW(QOFF, SHIFT) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y15, Y5, Y5; \
	VPAND Y8, Y9, Y6; \
	VPCMPEQB Y8, Y6, Y6; \
	VPAND Y13, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	VPADDB Y8, Y8, Y8

#define Q5KBLK(DOT, QOFF, SHIFT, XOFF, FOFF) \
	Q5KW(QOFF, SHIFT); \
	DOT(XOFF(DI)); \
	VBROADCASTSS FOFF(SP), Y4; \
	ACC

#define Q5KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $64-52; \
	ARGS; \
	BCAST($0x10101010, X13, Y13); \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	PREFETCHT0 4160(SI); \
	PREFETCHT0 4224(SI); \
	Q5KHEAD; \
	Q5KBLK(DOT, 48, 0, 0, 0); \
	Q5KBLK(DOT, 48, 4, 32, 4); \
	Q5KBLK(DOT, 80, 0, 64, 8); \
	Q5KBLK(DOT, 80, 4, 96, 12); \
	Q5KBLK(DOT, 112, 0, 128, 16); \
	Q5KBLK(DOT, 112, 4, 160, 20); \
	Q5KBLK(DOT, 144, 0, 192, 24); \
	Q5KBLK(DOT, 144, 4, 224, 28); \
	ADDQ $176, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	ADDQ $64, R13; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

Q5KFUNC(·dotQ5_KI8AVX2, DOTU_AVX2)
Q5KFUNC(·dotQ5_KI8VNNI, DOTU_VNNI)

// q4_K (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
// 128 of nibbles): q5_K without the fifth bits (Q5KSCALES, the same
// scale and min lanes).
#define Q4KHEAD \
	Q5KSCALES; \
	VPMOVZXBD X10, Y1; \
	VCVTDQ2PS Y1, Y1; \
	VBROADCASTSS X11, Y6; \
	VMULPS Y6, Y1, Y1; \
	VMULPS (R10), Y1, Y1; \
	VMOVUPS Y1, (SP); \
	VPSRLDQ $8, X10, X6; \
	VPMOVZXBD X6, Y6; \
	VMOVDQU (R13), Y1; \
	VPHADDD 32(R13), Y1, Y1; \
	VPERMQ $0xD8, Y1, Y1; \
	VPMULLD Y1, Y6, Y6; \
	VPXOR Y1, Y1, Y1; \
	VPSUBD Y6, Y1, Y6; \
	MINLANES

#define Q4KBLK(DOT, QOFF, SHIFT, XOFF, FOFF) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y15, Y5, Y5; \
	DOT(XOFF(DI)); \
	VBROADCASTSS FOFF(SP), Y4; \
	ACC

#define Q4KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $64-52; \
	ARGS; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	PREFETCHT0 4160(SI); \
	PREFETCHT0 4224(SI); \
	Q4KHEAD; \
	Q4KBLK(DOT, 16, 0, 0, 0); \
	Q4KBLK(DOT, 16, 4, 32, 4); \
	Q4KBLK(DOT, 48, 0, 64, 8); \
	Q4KBLK(DOT, 48, 4, 96, 12); \
	Q4KBLK(DOT, 80, 0, 128, 16); \
	Q4KBLK(DOT, 80, 4, 160, 20); \
	Q4KBLK(DOT, 112, 0, 192, 24); \
	Q4KBLK(DOT, 112, 4, 224, 28); \
	ADDQ $144, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	ADDQ $64, R13; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

Q4KFUNC(·dotQ4_KI8AVX2, DOTU_AVX2)
Q4KFUNC(·dotQ4_KI8VNNI, DOTU_VNNI)

// q2_K (84 bytes: 16 bytes of scale | min<<4, 64 bytes of 2-bit quants, f16
// d, f16 dmin). Y9 = 0x03 bytes, Y13 = lbHalfIdx.
#define Q2KHEAD \
	MOVWLZX 80(SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	MOVWLZX 82(SI), AX; \
	VMOVSS (R11)(AX*4), X12; \
	VMOVDQU (SI), X10; \
	VPAND X15, X10, X8; \
	VPMOVZXBD X8, Y6; \
	VPSRLDQ $8, X8, X8; \
	VPMOVZXBD X8, Y1; \
	HALFSCALES; \
	VPSRLW $4, X10, X8; \
	VPAND X15, X8, X8; \
	VPMOVZXBD X8, Y6; \
	VPMULLD (R13), Y6, Y6; \
	VPSRLDQ $8, X8, X8; \
	VPMOVZXBD X8, Y1; \
	VPMULLD 32(R13), Y1, Y1; \
	PAIRSUM; \
	VPXOR Y1, Y1, Y1; \
	VPSUBD Y6, Y1, Y6; \
	MINLANES

// Y4 = the half-block scales of block K (lanes 0-3, 4-7).
#define HALFSCALE(FOFF) \
	VMOVSD FOFF(SP), X4; \
	VPERMPS Y4, Y13, Y4

#define Q2KW(QOFF, SHIFT) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y9, Y5, Y5

#define Q2KBLK(DOT, QOFF, SHIFT, XOFF, FOFF) \
	Q2KW(QOFF, SHIFT); \
	DOT(XOFF(DI)); \
	HALFSCALE(FOFF); \
	ACC

#define Q2KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $64-52; \
	ARGS; \
	BCAST($0x03030303, X9, Y9); \
	VMOVDQU ·lbHalfIdx(SB), Y13; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	PREFETCHT0 4160(SI); \
	Q2KHEAD; \
	Q2KBLK(DOT, 16, 0, 0, 0); \
	Q2KBLK(DOT, 16, 2, 32, 8); \
	Q2KBLK(DOT, 16, 4, 64, 16); \
	Q2KBLK(DOT, 16, 6, 96, 24); \
	Q2KBLK(DOT, 48, 0, 128, 32); \
	Q2KBLK(DOT, 48, 2, 160, 40); \
	Q2KBLK(DOT, 48, 4, 192, 48); \
	Q2KBLK(DOT, 48, 6, 224, 56); \
	ADDQ $84, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	ADDQ $64, R13; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

Q2KFUNC(·dotQ2_KI8AVX2, DOTU_AVX2)
Q2KFUNC(·dotQ2_KI8VNNI, DOTU_VNNI)

// q3_K (110 bytes: 32 bytes of high-bit mask, 64 of 2-bit quants, 12 of
// packed 6-bit scales, f16 d). X10 = the sixteen scales (0..63, ggml's
// aux unpacking), Y9 = the mask, Y8 = the bit of block K in every byte,
// Y12 = 4 bytes, Y1 (in the blocks) = 3 bytes, Y13 = lbHalfIdx.
// X11 = d, X10 = the sixteen scales (0..63).
#define Q3KSCALES \
	MOVWLZX 108(SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	MOVL 96(SI), AX; \
	MOVL 100(SI), BX; \
	MOVL 104(SI), DX; \
	MOVL AX, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL DX, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	VMOVD R8, X10; \
	MOVL BX, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL DX, R9; \
	SHRL $2, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	VPINSRD $1, R8, X10, X10; \
	MOVL AX, R8; \
	SHRL $4, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL DX, R9; \
	SHRL $4, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	VPINSRD $2, R8, X10, X10; \
	MOVL BX, R8; \
	SHRL $4, R8; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL DX, R9; \
	SHRL $6, R9; \
	ANDL $0x03030303, R9; \
	SHLL $4, R9; \
	ORL R9, R8; \
	VPINSRD $3, R8, X10, X10

#define Q3KHEAD \
	Q3KSCALES; \
	BCAST($0x20202020, X8, X8); \
	VPSUBB X8, X10, X10; \
	VPMOVSXBD X10, Y6; \
	VPSRLDQ $8, X10, X10; \
	VPMOVSXBD X10, Y1; \
	HALFSCALES; \
	VMOVDQU (SI), Y9; \
	BCAST($0x03030303, X1, Y1); \
	BCAST($0x01010101, X8, Y8)

#define Q3KW(QOFF, SHIFT) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y1, Y5, Y5; \
	VPAND Y8, Y9, Y6; \
	VPCMPEQB Y8, Y6, Y6; \
	VPANDN Y12, Y6, Y6; \
	VPSUBB Y6, Y5, Y5; \
	VPADDB Y8, Y8, Y8

#define Q3KBLK(DOT, QOFF, SHIFT, XOFF, FOFF) \
	Q3KW(QOFF, SHIFT); \
	DOT(XOFF(DI)); \
	HALFSCALE(FOFF); \
	ACC

#define Q3KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $64-52; \
	ARGS; \
	BCAST($0x04040404, X12, Y12); \
	VMOVDQU ·lbHalfIdx(SB), Y13; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	PREFETCHT0 4160(SI); \
	Q3KHEAD; \
	Q3KBLK(DOT, 32, 0, 0, 0); \
	Q3KBLK(DOT, 32, 2, 32, 8); \
	Q3KBLK(DOT, 32, 4, 64, 16); \
	Q3KBLK(DOT, 32, 6, 96, 24); \
	Q3KBLK(DOT, 64, 0, 128, 32); \
	Q3KBLK(DOT, 64, 2, 160, 40); \
	Q3KBLK(DOT, 64, 4, 192, 48); \
	Q3KBLK(DOT, 64, 6, 224, 56); \
	ADDQ $110, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

Q3KFUNC(·dotQ3_KI8AVX2, DOTS_AVX2)
Q3KFUNC(·dotQ3_KI8VNNI, DOTS_VNNI)

// q6_K (210 bytes: 128 of low nibbles, 64 of high 2-bit pairs, 16 int8
// scales of 16 elements, f16 d): weights (ql | qh<<4) − 32, signed, with
// q3_K's half-block scales. Y9 = 0x03 bytes, Y8 = 32 bytes, Y13 =
// lbHalfIdx.
#define Q6KHEAD \
	MOVWLZX 208(SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	VPMOVSXBD 192(SI), Y6; \
	VPMOVSXBD 200(SI), Y1; \
	HALFSCALES

#define Q6KBLK(DOT, QLOFF, QSHIFT, QHOFF, HSHIFT, XOFF, FOFF) \
	VMOVDQU QLOFF(SI), Y5; \
	VPSRLW $QSHIFT, Y5, Y5; \
	VPAND Y15, Y5, Y5; \
	VMOVDQU QHOFF(SI), Y6; \
	VPSRLW $HSHIFT, Y6, Y6; \
	VPAND Y9, Y6, Y6; \
	VPSLLW $4, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	VPSUBB Y8, Y5, Y5; \
	DOT(XOFF(DI)); \
	HALFSCALE(FOFF); \
	ACC

#define Q6KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $64-52; \
	ARGS; \
	BCAST($0x03030303, X9, Y9); \
	BCAST($0x20202020, X8, Y8); \
	VMOVDQU ·lbHalfIdx(SB), Y13; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	PREFETCHT0 4160(SI); \
	PREFETCHT0 4224(SI); \
	PREFETCHT0 4288(SI); \
	Q6KHEAD; \
	Q6KBLK(DOT, 0, 0, 128, 0, 0, 0); \
	Q6KBLK(DOT, 32, 0, 128, 2, 32, 8); \
	Q6KBLK(DOT, 0, 4, 128, 4, 64, 16); \
	Q6KBLK(DOT, 32, 4, 128, 6, 96, 24); \
	Q6KBLK(DOT, 64, 0, 160, 0, 128, 32); \
	Q6KBLK(DOT, 96, 0, 160, 2, 160, 40); \
	Q6KBLK(DOT, 64, 4, 160, 4, 192, 48); \
	Q6KBLK(DOT, 96, 4, 160, 6, 224, 56); \
	ADDQ $210, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

Q6KFUNC(·dotQ6_KI8AVX2, DOTS_AVX2)
Q6KFUNC(·dotQ6_KI8VNNI, DOTS_VNNI)

// iq4_xs (136 bytes: f16 d, 16 bits of scale high pairs, 4 bytes of scale
// nibbles, 128 bytes of code-book nibbles). Y12 = the code book.
// Y1 = the eight scales ls-32 (dwords), X11 = d.
#define IQ4XSLS \
	MOVWLZX (SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	VMOVD 4(SI), X1; \
	VPSRLW $4, X1, X6; \
	VPUNPCKLBW X6, X1, X1; \
	VPAND X15, X1, X1; \
	VPMOVZXBD X1, Y1; \
	MOVWLZX 2(SI), AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, Y6; \
	VPSRLVD ·lbShift2(SB), Y6, Y6; \
	BCAST($3, X7, Y7); \
	VPAND Y7, Y6, Y6; \
	VPSLLD $4, Y6, Y6; \
	VPOR Y6, Y1, Y1; \
	BCAST($32, X7, Y7); \
	VPSUBD Y7, Y1, Y1

#define IQ4XSHEAD \
	IQ4XSLS; \
	VCVTDQ2PS Y1, Y1; \
	VBROADCASTSS X11, Y6; \
	VMULPS Y6, Y1, Y1; \
	VMULPS (R10), Y1, Y1; \
	VMOVUPS Y1, (SP)

#define IQ4XSBLK(DOT, QOFF, XOFF, FOFF) \
	NIBBLES(QOFF); \
	VPSHUFB Y5, Y12, Y5; \
	DOT(XOFF(DI)); \
	VBROADCASTSS FOFF(SP), Y4; \
	ACC

#define IQ4XSFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $64-52; \
	ARGS; \
	VBROADCASTI128 ·lbIQ4(SB), Y12; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	PREFETCHT0 4096(SI); \
	PREFETCHT0 4160(SI); \
	PREFETCHT0 4224(SI); \
	IQ4XSHEAD; \
	IQ4XSBLK(DOT, 8, 0, 0); \
	IQ4XSBLK(DOT, 24, 32, 4); \
	IQ4XSBLK(DOT, 40, 64, 8); \
	IQ4XSBLK(DOT, 56, 96, 12); \
	IQ4XSBLK(DOT, 72, 128, 16); \
	IQ4XSBLK(DOT, 88, 160, 20); \
	IQ4XSBLK(DOT, 104, 192, 24); \
	IQ4XSBLK(DOT, 120, 224, 28); \
	ADDQ $136, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

IQ4XSFUNC(·dotIQ4_XSI8AVX2, DOTS_AVX2)
IQ4XSFUNC(·dotIQ4_XSI8VNNI, DOTS_VNNI)

// Exact-mode row decoders: func(dst *float32, w *byte, nb int), nb
// 32-blocks, each value bit-identical to tensor.Dequantize's (the same
// float32 operations: the integer weight converted exactly, times its
// scale, then plus or minus the min). They unpack the weights with the
// macros of the Int8 dots; DI is the output.

#define DARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ w+8(FP), SI; \
	MOVQ nb+16(FP), CX; \
	MOVQ ·f16Table(SB), R11; \
	BCAST($0x0f0f0f0f, X15, Y15); \
	VPXOR Y13, Y13, Y13; \
	MOVL $4, AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, X6; \
	VINSERTI128 $1, X6, Y13, Y13

// Eight signed bytes X as floats times DW, stored at OFF(DI).
#define DQ(X, DW, OFF) \
	VPMOVSXBD X, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMULPS DW, Y6, Y6; \
	VMOVUPS Y6, OFF(DI)

// The same, then MOP (VADDPS or VSUBPS) M.
#define DQM(X, DW, MOP, M, OFF) \
	VPMOVSXBD X, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMULPS DW, Y6, Y6; \
	MOP M, Y6, Y6; \
	VMOVUPS Y6, OFF(DI)

// The 32 weights Y5, elements 0..15 scaled by DW0 and 16..31 by DW1.
#define OUT32(DW0, DW1) \
	DQ(X5, DW0, 0); \
	VPSRLDQ $8, X5, X7; \
	DQ(X7, DW0, 32); \
	VEXTRACTI128 $1, Y5, X5; \
	DQ(X5, DW1, 64); \
	VPSRLDQ $8, X5, X7; \
	DQ(X7, DW1, 96)

#define OUT32M(DW0, DW1, MOP, M0, M1) \
	DQM(X5, DW0, MOP, M0, 0); \
	VPSRLDQ $8, X5, X7; \
	DQM(X7, DW0, MOP, M0, 32); \
	VEXTRACTI128 $1, Y5, X5; \
	DQM(X5, DW1, MOP, M1, 64); \
	VPSRLDQ $8, X5, X7; \
	DQM(X7, DW1, MOP, M1, 96)

// Y4 = the f16 at OFF(SI), broadcast.
#define DF16(OFF, Y) \
	MOVWLZX OFF(SI), AX; \
	VBROADCASTSS (R11)(AX*4), Y

// func decQ4_1AVX2(dst *float32, w *byte, nb int)
TEXT ·decQ4_1AVX2(SB), NOSPLIT, $0-24
	DARGS
	TESTQ CX, CX
	JZ    done
loop:
	DF16(0, Y4)
	DF16(2, Y3)
	NIBBLES(4)
	OUT32M(Y4, Y4, VADDPS, Y3, Y3)
	ADDQ $20, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// func decQ5_0AVX2(dst *float32, w *byte, nb int)
TEXT ·decQ5_0AVX2(SB), NOSPLIT, $0-24
	DARGS
	VPCMPEQB Y8, Y8, Y8
	VMOVDQU ·lbShuf(SB), Y10
	VMOVDQU ·lbBits(SB), Y11
	BCAST($0xf0f0f0f0, X12, Y12)
	TESTQ CX, CX
	JZ    done
loop:
	DF16(0, Y4)
	NIBBLES(6)
	BITS32(2)
	VPANDN Y12, Y6, Y6
	VPOR   Y6, Y5, Y5
	OUT32(Y4, Y4)
	ADDQ $22, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// func decQ5_1AVX2(dst *float32, w *byte, nb int)
TEXT ·decQ5_1AVX2(SB), NOSPLIT, $0-24
	DARGS
	VPCMPEQB Y8, Y8, Y8
	VMOVDQU ·lbShuf(SB), Y10
	VMOVDQU ·lbBits(SB), Y11
	BCAST($0x10101010, X12, Y12)
	TESTQ CX, CX
	JZ    done
loop:
	DF16(0, Y4)
	DF16(2, Y3)
	NIBBLES(8)
	BITS32(4)
	VPAND Y12, Y6, Y6
	VPOR  Y6, Y5, Y5
	OUT32M(Y4, Y4, VADDPS, Y3, Y3)
	ADDQ $24, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// func decIQ4_NLAVX2(dst *float32, w *byte, nb int)
TEXT ·decIQ4_NLAVX2(SB), NOSPLIT, $0-24
	DARGS
	VBROADCASTI128 ·lbIQ4(SB), Y9
	TESTQ CX, CX
	JZ    done
loop:
	DF16(0, Y4)
	NIBBLES(2)
	VPSHUFB Y5, Y9, Y5
	OUT32(Y4, Y4)
	ADDQ $18, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// func decMXFP4AVX2(dst *float32, w *byte, nb int)
TEXT ·decMXFP4AVX2(SB), NOSPLIT, $0-24
	DARGS
	MOVQ ·e8m0HalfTable(SB), R9
	VBROADCASTI128 ·lbMXFP4(SB), Y12
	TESTQ CX, CX
	JZ    done
loop:
	MOVBLZX (SI), AX
	VBROADCASTSS (R9)(AX*4), Y4
	NIBBLES(1)
	VPSHUFB Y5, Y12, Y5
	OUT32(Y4, Y4)
	ADDQ $17, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// q5_K: the frame holds d·sc (0..31) and dmin·m (32..63) of the eight
// blocks.
#define DQ5KBLK(QOFF, SHIFT, FOFF) \
	Q5KW(QOFF, SHIFT); \
	VBROADCASTSS FOFF(SP), Y4; \
	VBROADCASTSS FOFF+32(SP), Y3; \
	OUT32M(Y4, Y4, VSUBPS, Y3, Y3); \
	ADDQ $128, DI

// func decQ5_KAVX2(dst *float32, w *byte, nb int)
TEXT ·decQ5_KAVX2(SB), NOSPLIT, $64-24
	DARGS
	BCAST($0x10101010, X13, Y13)
	SHRQ $3, CX
	JZ   done
loop:
	Q5KSCALES
	VPMOVZXBD X10, Y1
	VCVTDQ2PS Y1, Y1
	VBROADCASTSS X11, Y6
	VMULPS Y6, Y1, Y1
	VMOVUPS Y1, (SP)
	VPSRLDQ $8, X10, X1
	VPMOVZXBD X1, Y1
	VCVTDQ2PS Y1, Y1
	VBROADCASTSS X12, Y6
	VMULPS Y6, Y1, Y1
	VMOVUPS Y1, 32(SP)
	VMOVDQU 16(SI), Y9
	BCAST($0x01010101, X8, Y8)
	DQ5KBLK(48, 0, 0)
	DQ5KBLK(48, 4, 4)
	DQ5KBLK(80, 0, 8)
	DQ5KBLK(80, 4, 12)
	DQ5KBLK(112, 0, 16)
	DQ5KBLK(112, 4, 20)
	DQ5KBLK(144, 0, 24)
	DQ5KBLK(144, 4, 28)
	ADDQ $176, SI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// q2_K: the frame holds d·sc (0..63) and dmin·m (64..127) of the sixteen
// half blocks.
#define DQ2KBLK(QOFF, SHIFT, FOFF) \
	Q2KW(QOFF, SHIFT); \
	VBROADCASTSS FOFF(SP), Y4; \
	VBROADCASTSS FOFF+4(SP), Y10; \
	VBROADCASTSS FOFF+64(SP), Y3; \
	VBROADCASTSS FOFF+68(SP), Y12; \
	OUT32M(Y4, Y10, VSUBPS, Y3, Y12); \
	ADDQ $128, DI

// Sixteen bytes X as floats times the broadcast float S, to OFF(SP) and
// OFF+32(SP) (SX scratch).
#define SCALES16(X, S, SX, OFF) \
	VPMOVZXBD X, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS S, Y7; \
	VMULPS Y7, Y6, Y6; \
	VMOVUPS Y6, OFF(SP); \
	VPSRLDQ $8, X, SX; \
	VPMOVZXBD SX, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMULPS Y7, Y6, Y6; \
	VMOVUPS Y6, OFF+32(SP)

// func decQ2_KAVX2(dst *float32, w *byte, nb int)
TEXT ·decQ2_KAVX2(SB), NOSPLIT, $128-24
	DARGS
	BCAST($0x03030303, X9, Y9)
	SHRQ $3, CX
	JZ   done
loop:
	MOVWLZX 80(SI), AX
	VMOVSS  (R11)(AX*4), X11
	MOVWLZX 82(SI), AX
	VMOVSS  (R11)(AX*4), X12
	VMOVDQU (SI), X10
	VPAND   X15, X10, X8
	SCALES16(X8, X11, X1, 0)
	VPSRLW  $4, X10, X8
	VPAND   X15, X8, X8
	SCALES16(X8, X12, X1, 64)
	DQ2KBLK(16, 0, 0)
	DQ2KBLK(16, 2, 8)
	DQ2KBLK(16, 4, 16)
	DQ2KBLK(16, 6, 24)
	DQ2KBLK(48, 0, 32)
	DQ2KBLK(48, 2, 40)
	DQ2KBLK(48, 4, 48)
	DQ2KBLK(48, 6, 56)
	ADDQ $84, SI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

#define DQ3KBLK(QOFF, SHIFT, FOFF) \
	Q3KW(QOFF, SHIFT); \
	VBROADCASTSS FOFF(SP), Y4; \
	VBROADCASTSS FOFF+4(SP), Y10; \
	OUT32(Y4, Y10); \
	ADDQ $128, DI

// func decQ3_KAVX2(dst *float32, w *byte, nb int)
TEXT ·decQ3_KAVX2(SB), NOSPLIT, $64-24
	DARGS
	BCAST($0x04040404, X12, Y12)
	SHRQ $3, CX
	JZ   done
loop:
	Q3KSCALES
	BCAST($0x20202020, X8, X8)
	VPSUBB X8, X10, X10
	VPMOVSXBD X10, Y6
	VCVTDQ2PS Y6, Y6
	VBROADCASTSS X11, Y7
	VMULPS Y7, Y6, Y6
	VMOVUPS Y6, (SP)
	VPSRLDQ $8, X10, X10
	VPMOVSXBD X10, Y6
	VCVTDQ2PS Y6, Y6
	VMULPS Y7, Y6, Y6
	VMOVUPS Y6, 32(SP)
	VMOVDQU (SI), Y9
	BCAST($0x03030303, X1, Y1)
	BCAST($0x01010101, X8, Y8)
	DQ3KBLK(32, 0, 0)
	DQ3KBLK(32, 2, 8)
	DQ3KBLK(32, 4, 16)
	DQ3KBLK(32, 6, 24)
	DQ3KBLK(64, 0, 32)
	DQ3KBLK(64, 2, 40)
	DQ3KBLK(64, 4, 48)
	DQ3KBLK(64, 6, 56)
	ADDQ $110, SI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

#define DIQ4XSBLK(QOFF, FOFF) \
	NIBBLES(QOFF); \
	VPSHUFB Y5, Y12, Y5; \
	VBROADCASTSS FOFF(SP), Y4; \
	OUT32(Y4, Y4); \
	ADDQ $128, DI

// func decIQ4_XSAVX2(dst *float32, w *byte, nb int)
TEXT ·decIQ4_XSAVX2(SB), NOSPLIT, $32-24
	DARGS
	VBROADCASTI128 ·lbIQ4(SB), Y12
	SHRQ $3, CX
	JZ   done
loop:
	IQ4XSLS
	VCVTDQ2PS Y1, Y1
	VBROADCASTSS X11, Y6
	VMULPS Y6, Y1, Y1
	VMOVUPS Y1, (SP)
	DIQ4XSBLK(8, 0)
	DIQ4XSBLK(24, 4)
	DIQ4XSBLK(40, 8)
	DIQ4XSBLK(56, 12)
	DIQ4XSBLK(72, 16)
	DIQ4XSBLK(88, 20)
	DIQ4XSBLK(104, 24)
	DIQ4XSBLK(120, 28)
	ADDQ $136, SI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

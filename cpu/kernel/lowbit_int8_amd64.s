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
// f16 → f32 table; Y0 the eight lane sums, X3 the min sum; Y15 0x0f
// bytes, Y14 int16 ones, Y13 the nibble shift counts (0 in the low lane,
// 4 in the high lane); Y4 the block scale, Y5 the weight bytes, Y7 the
// integer lanes; Y6 and X8 scratch.

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
	VXORPS X3, X3, X3

// ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)) + m.
#define FINISH \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0; \
	VADDSS X3, X0, X0; \
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

// Y4 = f16 at OFF(SI) times the block's dx (at DOFF(R10)), broadcast.
#define F16SCALE(OFF, DOFF) \
	MOVWLZX OFF(SI), AX; \
	VMOVSS (R11)(AX*4), X4; \
	VMULSS DOFF(R10), X4, X4; \
	VBROADCASTSS X4, Y4

// The 16 nibble bytes at OFF(SI) as 32 bytes 0..15 (low nibbles first).
#define NIBBLES(OFF) \
	VBROADCASTI128 OFF(SI), Y5; \
	VPSRLVD Y13, Y5, Y5; \
	VPAND Y15, Y5, Y5

// Y6 = 0xff in byte k where bit k of the 32 bits at OFF(SI) is set.
#define BITS32(OFF) \
	VPBROADCASTD OFF(SI), Y6; \
	VPSHUFB ·lbShuf(SB), Y6, Y6; \
	VPOR ·lbBits(SB), Y6, Y6; \
	VPCMPEQB Y8, Y6, Y6

// m += f16 at OFF(SI) times xs[b].
#define FMIN(OFF) \
	MOVWLZX OFF(SI), AX; \
	VMOVSS (R11)(AX*4), X6; \
	VMULSS (R12), X6, X6; \
	VADDSS X6, X3, X3

// A codec of 32-blocks of BB bytes: BLK(DOT) computes Y4 and Y7 of the
// block at SI.
#define FUNC32(NAME, BLK, DOT, BB) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	VPCMPEQB Y8, Y8, Y8; \
	TESTQ CX, CX; \
	JZ done; \
loop: \
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
	F16SCALE(0, 0); \
	NIBBLES(4); \
	DOT((DI)); \
	FMIN(2)

// q5_0: f16 d, 32 fifth bits, nibbles; w = q | (bit ? 0 : 0xf0) as int8.
#define Q5_0BLK(DOT) \
	F16SCALE(0, 0); \
	NIBBLES(6); \
	BITS32(2); \
	MOVL $0xf0f0f0f0, AX; \
	VMOVD AX, X1; \
	VPBROADCASTD X1, Y1; \
	VPANDN Y1, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	DOT((DI))

// q5_1: f16 d, f16 m, 32 fifth bits, nibbles; unsigned weights.
#define Q5_1BLK(DOT) \
	F16SCALE(0, 0); \
	NIBBLES(8); \
	BITS32(4); \
	MOVL $0x10101010, AX; \
	VMOVD AX, X1; \
	VPBROADCASTD X1, Y1; \
	VPAND Y1, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	DOT((DI)); \
	FMIN(2)

// iq4_nl: f16 d, nibbles into the code book.
#define IQ4_NLBLK(DOT) \
	F16SCALE(0, 0); \
	NIBBLES(2); \
	VBROADCASTI128 ·lbIQ4(SB), Y1; \
	VPSHUFB Y5, Y1, Y5; \
	DOT((DI))

// mxfp4: e8m0 exponent (R9: the halved-scale table), nibbles into the
// doubled e2m1 code book.
#define MXFP4BLK(DOT) \
	MOVBLZX (SI), AX; \
	VMOVSS (R9)(AX*4), X4; \
	VMULSS (R10), X4, X4; \
	VBROADCASTSS X4, Y4; \
	NIBBLES(1); \
	VBROADCASTI128 ·lbMXFP4(SB), Y1; \
	VPSHUFB Y5, Y1, Y5; \
	DOT((DI))

FUNC32(·dotQ4_1I8AVX2, Q4_1BLK, DOTU_AVX2, 20)
FUNC32(·dotQ4_1I8VNNI, Q4_1BLK, DOTU_VNNI, 20)
FUNC32(·dotQ5_0I8AVX2, Q5_0BLK, DOTS_AVX2, 22)
FUNC32(·dotQ5_0I8VNNI, Q5_0BLK, DOTS_VNNI, 22)
FUNC32(·dotQ5_1I8AVX2, Q5_1BLK, DOTU_AVX2, 24)
FUNC32(·dotQ5_1I8VNNI, Q5_1BLK, DOTU_VNNI, 24)
FUNC32(·dotIQ4_NLI8AVX2, IQ4_NLBLK, DOTS_AVX2, 18)
FUNC32(·dotIQ4_NLI8VNNI, IQ4_NLBLK, DOTS_VNNI, 18)

#define MXFP4FUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	MOVQ ·e8m0HalfTable(SB), R9; \
	TESTQ CX, CX; \
	JZ done; \
loop: \
	MXFP4BLK(DOT); \
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
// unrolls their eight 32-blocks; K is the block, XOFF = 32K, DOFF = 4K,
// HOFF = 8K. X11 = d, X12 = dmin of the super-block.

// Y4 = float(AX)·d·dx (one scale for the block).
#define ISCALE(DOFF) \
	VCVTSI2SSL AX, X4, X4; \
	VMULSS X11, X4, X4; \
	VMULSS DOFF(R10), X4, X4; \
	VBROADCASTSS X4, Y4

// Y4 = float(AX)·d·dx in the low lane, float(DX)·d·dx in the high lane.
#define ISCALE2(DOFF) \
	VCVTSI2SSL AX, X4, X4; \
	VMULSS X11, X4, X4; \
	VMULSS DOFF(R10), X4, X4; \
	VBROADCASTSS X4, X4; \
	VCVTSI2SSL DX, X6, X6; \
	VMULSS X11, X6, X6; \
	VMULSS DOFF(R10), X6, X6; \
	VBROADCASTSS X6, X6; \
	VINSERTF128 $1, X6, Y4, Y4

// m += float(dmin·dx)·float(BX) (BX the negated integer min sum).
#define IMIN(DOFF) \
	VCVTSI2SSL BX, X6, X6; \
	VMULSS DOFF(R10), X12, X1; \
	VMULSS X1, X6, X6; \
	VADDSS X6, X3, X3

// q5_K (176 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 32
// bytes of fifth bits, 128 of nibbles). X10 = the eight scales then the
// eight mins (ggml's utmp unpacking); Y9 = the fifth bits, Y8 = the bit of
// block K in every byte, Y13 = 0x10 bytes.
#define Q5KHEAD \
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
	VPINSRD $3, R8, X10, X10; \
	VMOVDQU 16(SI), Y9; \
	MOVL $0x01010101, AX; \
	VMOVD AX, X8; \
	VPBROADCASTD X8, Y8

#define Q5KBLK(DOT, K, MK, QOFF, SHIFT, XOFF, DOFF, HOFF) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y15, Y5, Y5; \
	VPAND Y8, Y9, Y6; \
	VPCMPEQB Y8, Y6, Y6; \
	VPAND Y13, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	VPADDB Y8, Y8, Y8; \
	DOT(XOFF(DI)); \
	VPEXTRB $K, X10, AX; \
	ISCALE(DOFF); \
	ACC; \
	VPEXTRB $MK, X10, BX; \
	MOVL HOFF(R13), DX; \
	ADDL HOFF+4(R13), DX; \
	IMULL DX, BX; \
	NEGL BX; \
	IMIN(DOFF)

#define Q5KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	MOVL $0x10101010, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	Q5KHEAD; \
	Q5KBLK(DOT, 0, 8, 48, 0, 0, 0, 0); \
	Q5KBLK(DOT, 1, 9, 48, 4, 32, 4, 8); \
	Q5KBLK(DOT, 2, 10, 80, 0, 64, 8, 16); \
	Q5KBLK(DOT, 3, 11, 80, 4, 96, 12, 24); \
	Q5KBLK(DOT, 4, 12, 112, 0, 128, 16, 32); \
	Q5KBLK(DOT, 5, 13, 112, 4, 160, 20, 40); \
	Q5KBLK(DOT, 6, 14, 144, 0, 192, 24, 48); \
	Q5KBLK(DOT, 7, 15, 144, 4, 224, 28, 56); \
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

// q2_K (84 bytes: 16 bytes of scale | min<<4, 64 bytes of 2-bit quants, f16
// d, f16 dmin). X10 = the sixteen scale bytes.
#define Q2KHEAD \
	MOVWLZX 80(SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	MOVWLZX 82(SI), AX; \
	VMOVSS (R11)(AX*4), X12; \
	VMOVDQU (SI), X10; \
	MOVL $0x03030303, AX; \
	VMOVD AX, X9; \
	VPBROADCASTD X9, Y9

#define Q2KBLK(DOT, S0, S1, QOFF, SHIFT, XOFF, DOFF, HOFF) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y9, Y5, Y5; \
	DOT(XOFF(DI)); \
	VPEXTRB $S0, X10, AX; \
	MOVL AX, BX; \
	ANDL $15, AX; \
	SHRL $4, BX; \
	VPEXTRB $S1, X10, DX; \
	MOVL DX, R8; \
	ANDL $15, DX; \
	SHRL $4, R8; \
	ISCALE2(DOFF); \
	ACC; \
	IMULL HOFF(R13), BX; \
	IMULL HOFF+4(R13), R8; \
	ADDL R8, BX; \
	NEGL BX; \
	IMIN(DOFF)

#define Q2KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	Q2KHEAD; \
	Q2KBLK(DOT, 0, 1, 16, 0, 0, 0, 0); \
	Q2KBLK(DOT, 2, 3, 16, 2, 32, 4, 8); \
	Q2KBLK(DOT, 4, 5, 16, 4, 64, 8, 16); \
	Q2KBLK(DOT, 6, 7, 16, 6, 96, 12, 24); \
	Q2KBLK(DOT, 8, 9, 48, 0, 128, 16, 32); \
	Q2KBLK(DOT, 10, 11, 48, 2, 160, 20, 40); \
	Q2KBLK(DOT, 12, 13, 48, 4, 192, 24, 48); \
	Q2KBLK(DOT, 14, 15, 48, 6, 224, 28, 56); \
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
// Y2 = 3 bytes, Y12 = 4 bytes.
#define Q3KHEAD \
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
	VPINSRD $3, R8, X10, X10; \
	VMOVDQU (SI), Y9; \
	MOVL $0x01010101, AX; \
	VMOVD AX, X8; \
	VPBROADCASTD X8, Y8

#define Q3KBLK(DOT, S0, S1, QOFF, SHIFT, XOFF, DOFF) \
	VMOVDQU QOFF(SI), Y5; \
	VPSRLW $SHIFT, Y5, Y5; \
	VPAND Y2, Y5, Y5; \
	VPAND Y8, Y9, Y6; \
	VPCMPEQB Y8, Y6, Y6; \
	VPANDN Y12, Y6, Y6; \
	VPSUBB Y6, Y5, Y5; \
	VPADDB Y8, Y8, Y8; \
	DOT(XOFF(DI)); \
	VPEXTRB $S0, X10, AX; \
	SUBL $32, AX; \
	VPEXTRB $S1, X10, DX; \
	SUBL $32, DX; \
	ISCALE2(DOFF); \
	ACC

#define Q3KFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	MOVL $0x03030303, AX; \
	VMOVD AX, X2; \
	VPBROADCASTD X2, Y2; \
	MOVL $0x04040404, AX; \
	VMOVD AX, X12; \
	VPBROADCASTD X12, Y12; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	Q3KHEAD; \
	Q3KBLK(DOT, 0, 1, 32, 0, 0, 0); \
	Q3KBLK(DOT, 2, 3, 32, 2, 32, 4); \
	Q3KBLK(DOT, 4, 5, 32, 4, 64, 8); \
	Q3KBLK(DOT, 6, 7, 32, 6, 96, 12); \
	Q3KBLK(DOT, 8, 9, 64, 0, 128, 16); \
	Q3KBLK(DOT, 10, 11, 64, 2, 160, 20); \
	Q3KBLK(DOT, 12, 13, 64, 4, 192, 24); \
	Q3KBLK(DOT, 14, 15, 64, 6, 224, 28); \
	ADDQ $110, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

Q3KFUNC(·dotQ3_KI8AVX2, DOTS_AVX2)
Q3KFUNC(·dotQ3_KI8VNNI, DOTS_VNNI)

// iq4_xs (136 bytes: f16 d, 16 bits of scale high pairs, 4 bytes of scale
// nibbles, 128 bytes of code-book nibbles). Y12 = the code book.
#define IQ4XSBLK(DOT, LOFF, LSHIFT, HSHIFT, QOFF, XOFF, DOFF) \
	MOVBLZX LOFF(SI), AX; \
	SHRL $LSHIFT, AX; \
	ANDL $15, AX; \
	MOVWLZX 2(SI), BX; \
	SHRL $HSHIFT, BX; \
	ANDL $3, BX; \
	SHLL $4, BX; \
	ORL BX, AX; \
	SUBL $32, AX; \
	ISCALE(DOFF); \
	NIBBLES(QOFF); \
	VPSHUFB Y5, Y12, Y5; \
	DOT(XOFF(DI)); \
	ACC

#define IQ4XSFUNC(NAME, DOT) \
TEXT NAME(SB), NOSPLIT, $0-52; \
	ARGS; \
	VBROADCASTI128 ·lbIQ4(SB), Y12; \
	SHRQ $3, CX; \
	JZ done; \
loop: \
	MOVWLZX (SI), AX; \
	VMOVSS (R11)(AX*4), X11; \
	IQ4XSBLK(DOT, 4, 0, 0, 8, 0, 0); \
	IQ4XSBLK(DOT, 4, 4, 2, 24, 32, 4); \
	IQ4XSBLK(DOT, 5, 0, 4, 40, 64, 8); \
	IQ4XSBLK(DOT, 5, 4, 6, 56, 96, 12); \
	IQ4XSBLK(DOT, 6, 0, 8, 72, 128, 16); \
	IQ4XSBLK(DOT, 6, 4, 10, 88, 160, 20); \
	IQ4XSBLK(DOT, 7, 0, 12, 104, 192, 24); \
	IQ4XSBLK(DOT, 7, 4, 14, 120, 224, 28); \
	ADDQ $136, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R10; \
	DECQ CX; \
	JNZ loop; \
done: \
	FINISH

IQ4XSFUNC(·dotIQ4_XSI8AVX2, DOTS_AVX2)
IQ4XSFUNC(·dotIQ4_XSI8VNNI, DOTS_VNNI)

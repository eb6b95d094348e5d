//go:build amd64 && !purego

#include "textflag.h"

// q6_K: per 8-element group of one 128-element half, A = ql[l..], B =
// ql[l+32..], H = qh[l..] zero-extended to dwords; the four quarters are
//   q1 = A&15 | (H<<4)&0x30   q2 = B&15 | (H<<2)&0x30
//   q3 = A>>4 | H&0x30        q4 = B>>4 | (H>>2)&0x30
// each minus 32. Y15 = 15, Y14 = 0x30, Y13 = 32 (dwords). OP is VMULPS
// for the first group of a 16-element sub-block, VFMADD231PS otherwise
// (both read as "P (+)= mem·q").
#define Q6GROUP(OP, AOFF, BOFF, HOFF, XA, XB, XC, XD) \
	VPMOVZXBD AOFF(SI), Y4; \
	VPMOVZXBD BOFF(SI), Y5; \
	VPMOVZXBD HOFF(R8), Y6; \
	VPAND Y15, Y4, Y7; \
	VPSLLD $4, Y6, Y8; \
	VPAND Y14, Y8, Y8; \
	VPOR Y8, Y7, Y7; \
	VPSUBD Y13, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	OP(XA(DI), Y7, Y0); \
	VPAND Y15, Y5, Y7; \
	VPSLLD $2, Y6, Y8; \
	VPAND Y14, Y8, Y8; \
	VPOR Y8, Y7, Y7; \
	VPSUBD Y13, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	OP(XB(DI), Y7, Y1); \
	VPSRLD $4, Y4, Y7; \
	VPAND Y14, Y6, Y8; \
	VPOR Y8, Y7, Y7; \
	VPSUBD Y13, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	OP(XC(DI), Y7, Y2); \
	VPSRLD $4, Y5, Y7; \
	VPSRLD $2, Y6, Y8; \
	VPAND Y14, Y8, Y8; \
	VPOR Y8, Y7, Y7; \
	VPSUBD Y13, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	OP(XD(DI), Y7, Y3)

#define MULOP(M, Q, P) VMULPS M, Q, P
#define FMAOP(M, Q, P) VFMADD231PS M, Q, P

// acc(Y12) += dsc[k]·P for the four quarter accumulators.
#define Q6SCALE(O0, O1, O2, O3) \
	VBROADCASTSS O0(R9), Y7; \
	VFMADD231PS Y0, Y7, Y12; \
	VBROADCASTSS O1(R9), Y7; \
	VFMADD231PS Y1, Y7, Y12; \
	VBROADCASTSS O2(R9), Y7; \
	VFMADD231PS Y2, Y7, Y12; \
	VBROADCASTSS O3(R9), Y7; \
	VFMADD231PS Y3, Y7, Y12

// q6_K, one quarter k of a 128-element half: the 32 six-bit values are
// assembled as bytes (q = ql nibble | qh pair<<4, minus 32) and widened
// eight at a time. SI = ql of the half (QLOFF adds 32
// for odd k), Y12 = its 32 qh bytes. HSHIFT moves qh's pair k to bits 4-5.
// P0 sums elements 0-15 (sub-block 2k), P1 elements 16-31 (2k+1).
#define Q6QUARTER(QLOFF, NIBSHIFT, HSHIFT, XOFF, S0, S1) \
	VMOVDQU QLOFF(SI), Y4; \
	NIBSHIFT; \
	VPAND Y15, Y4, Y4; \
	HSHIFT; \
	VPAND Y14, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	VPSUBB Y13, Y4, Y4; \
	VPMOVSXBD X4, Y6; \
	VPSHUFD $0x0e, X4, X7; \
	VPMOVSXBD X7, Y7; \
	VEXTRACTI128 $1, Y4, X8; \
	VPSHUFD $0x0e, X8, X9; \
	VPMOVSXBD X8, Y8; \
	VPMOVSXBD X9, Y9; \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y7, Y7; \
	VCVTDQ2PS Y8, Y8; \
	VCVTDQ2PS Y9, Y9; \
	VMULPS XOFF(DI), Y6, Y6; \
	VFMADD231PS (XOFF+32)(DI), Y7, Y6; \
	VMULPS (XOFF+64)(DI), Y8, Y8; \
	VFMADD231PS (XOFF+96)(DI), Y9, Y8; \
	VBROADCASTSS S0(R9), Y7; \
	VFMADD231PS Y6, Y7, Y11; \
	VBROADCASTSS S1(R9), Y9; \
	VFMADD231PS Y8, Y9, Y10

#define NOSHIFT VMOVDQA Y4, Y4
#define NIBHI VPSRLW $4, Y4, Y4
#define H0 VPSLLW $4, Y12, Y5
#define H1 VPSLLW $2, Y12, Y5
#define H2 VMOVDQA Y12, Y5
#define H3 VPSRLW $2, Y12, Y5

// func dotQ6_KAVX2(w *byte, x *float32, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $64-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x30303030, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x20202020, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VXORPS Y11, Y11, Y11
	VXORPS Y10, Y10, Y10
	TESTQ CX, CX
	JZ    q6done

q6block:
	// The block's 210 bytes, 4 KiB ahead (every line they touch).
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	PREFETCHT0 4288(SI)
	PREFETCHT0 4305(SI)
	// dsc[i] = d·scale[i] for the 16 sub-blocks, at 0(SP).
	VPBROADCASTW 208(SI), X4
	VCVTPH2PS X4, Y4
	VPMOVSXBD 192(SI), Y5
	VPMOVSXBD 200(SI), Y6
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VMULPS Y4, Y5, Y5
	VMULPS Y4, Y6, Y6
	VMOVUPS Y5, 0(SP)
	VMOVUPS Y6, 32(SP)
	MOVQ SP, R9
	LEAQ 128(SI), R8
	MOVQ $2, DX

q6half:
	VMOVDQU (R8), Y12
	Q6QUARTER(0, NOSHIFT, H0, 0, 0, 4)
	Q6QUARTER(32, NOSHIFT, H1, 128, 8, 12)
	Q6QUARTER(0, NIBHI, H2, 256, 16, 20)
	Q6QUARTER(32, NIBHI, H3, 384, 24, 28)
	ADDQ $64, SI
	ADDQ $32, R8
	ADDQ $512, DI
	ADDQ $32, R9
	DECQ DX
	JNZ  q6half

	ADDQ $(210-128), SI
	DECQ CX
	JNZ  q6block

q6done:
	VADDPS Y10, Y11, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// q4_K: one 32-byte run of nibbles at QOFF(SI) covers sub-blocks 2j (low
// nibbles, x at XOFF) and 2j+1 (high nibbles, x at XOFF+128).
#define Q4KGROUP(OP, QOFF, XLO, XHI) \
	VPMOVZXBD QOFF(R11), Y4; \
	VPAND Y15, Y4, Y5; \
	VPSRLD $4, Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y4, Y4; \
	OP(XLO(DI), Y5, Y0); \
	OP(XHI(DI), Y4, Y1)

// func dotQ4_KAVX2(w *byte, x *float32, xsum *float32, nb int) float32
// xsum[j] is the sum of x over sub-block j (32 elements).
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $32-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xsum+16(FP), R10
	MOVQ nb+24(FP), CX
	MOVL $15, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JZ    q4kdone

q4kblock:
	// The block's 144 bytes, 4 KiB ahead (every line they touch).
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	PREFETCHT0 4239(SI)
	VPBROADCASTW 0(SI), X4
	VCVTPH2PS X4, Y4
	VPBROADCASTW 2(SI), X5
	VCVTPH2PS X5, Y5
	MOVL 4(SI), AX  // u0
	MOVL 8(SI), BX  // u1
	MOVL 12(SI), DX // u2
	// scales 0..3 = u0 & 0x3f3f3f3f
	MOVL AX, R8
	ANDL $0x3f3f3f3f, R8
	// scales 4..7 = u2&0x0f0f0f0f | ((u0>>6)&0x03030303)<<4
	MOVL AX, R9
	SHRL $6, R9
	ANDL $0x03030303, R9
	SHLL $4, R9
	MOVL DX, R12
	ANDL $0x0f0f0f0f, R12
	ORL  R12, R9
	VMOVD R8, X6
	VPINSRD $1, R9, X6, X6
	// mins 0..3 = u1 & 0x3f3f3f3f
	MOVL BX, R8
	ANDL $0x3f3f3f3f, R8
	// mins 4..7 = (u2>>4)&0x0f0f0f0f | ((u1>>6)&0x03030303)<<4
	MOVL BX, R9
	SHRL $6, R9
	ANDL $0x03030303, R9
	SHLL $4, R9
	SHRL $4, DX
	ANDL $0x0f0f0f0f, DX
	ORL  DX, R9
	VMOVD R8, X7
	VPINSRD $1, R9, X7, X7
	VPMOVZXBD X6, Y6
	VPMOVZXBD X7, Y7
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VMULPS Y4, Y6, Y6
	VMULPS Y5, Y7, Y7
	VMOVUPS Y6, 0(SP)
	VFMADD231PS (R10), Y7, Y11
	LEAQ 16(SI), R11
	MOVQ SP, R9
	MOVQ $4, DX

q4kpair:
	Q4KGROUP(MULOP, 0, 0, 128)
	Q4KGROUP(FMAOP, 8, 32, 160)
	Q4KGROUP(FMAOP, 16, 64, 192)
	Q4KGROUP(FMAOP, 24, 96, 224)
	VBROADCASTSS 0(R9), Y7
	VFMADD231PS Y0, Y7, Y12
	VBROADCASTSS 4(R9), Y7
	VFMADD231PS Y1, Y7, Y12
	ADDQ $32, R11
	ADDQ $256, DI
	ADDQ $8, R9
	DECQ DX
	JNZ  q4kpair

	ADDQ $144, SI
	ADDQ $32, R10
	DECQ CX
	JNZ  q4kblock

q4kdone:
	VSUBPS Y11, Y12, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

#!/usr/bin/env python3
"""Writes cpu/kernel/amx_amd64.s, the AMX-INT8 prefill tiles of q4_0 and q8_0:
    python3 scripts/gen-amx-asm.py > cpu/kernel/amx_amd64.s
The Go assembler has no AMX mnemonics, so the tile instructions are encoded
here as bytes (checked against hand-encoded ones below); the rest is Go
assembly. See the header it writes for the kernel's contract."""
import sys

REG = {'AX': 0, 'CX': 1, 'DX': 2, 'BX': 3, 'SP': 4, 'BP': 5, 'SI': 6, 'DI': 7,
       'R8': 8, 'R9': 9, 'R10': 10, 'R11': 11, 'R12': 12, 'R13': 13, 'R14': 14, 'R15': 15}


def bytes_(bs, comment):
    return "\t// %s\n\t" % comment + "; ".join("BYTE $0x%02X" % b for b in bs)

def vex3(R, X, B, mmmmm, W, vvvv, L, pp):
    b1 = ((not R) << 7) | ((not X) << 6) | ((not B) << 5) | mmmmm
    b2 = (W << 7) | ((~vvvv & 0xf) << 3) | (L << 2) | pp
    return [0xC4, b1, b2]

def mem_tile(op, pp, tmm, base, index, disp):
    # op 0x4B with SIB [base + index*1 + disp]
    b, i = REG[base], REG[index]
    v = vex3(False, i >= 8, b >= 8, 2, 0, 0, 0, pp)
    if disp == 0 and (b & 7) != 5:
        mod, d = 0, []
    elif -128 <= disp < 128:
        mod, d = 1, [disp & 0xff]
    else:
        mod, d = 2, list((disp & 0xffffffff).to_bytes(4, 'little'))
    modrm = (mod << 6) | (tmm << 3) | 4
    sib = ((i & 7) << 3) | (b & 7)
    return v + [op, modrm, sib] + d

def tileloadd(tmm, base, index, disp=0):
    return bytes_(mem_tile(0x4B, 3, tmm, base, index, disp), "TILELOADD tmm%d, [%s+%s+%d]" % (tmm, base, index, disp))

def tilestored(tmm, base, index, disp=0):
    return bytes_(mem_tile(0x4B, 2, tmm, base, index, disp), "TILESTORED [%s+%s+%d], tmm%d" % (base, index, disp, tmm))

def tdp(kind, c, a, b):
    pp = {'bssd': 3, 'bsud': 2, 'busd': 1, 'buud': 0}[kind]
    v = vex3(False, False, False, 2, 0, b, 0, pp)
    return bytes_(v + [0x5E, 0xC0 | (c << 3) | a], "TDP%s tmm%d, tmm%d, tmm%d" % (kind.upper(), c, a, b))

def tilezero(t):
    return bytes_([0xC4, 0xE2, 0x7B, 0x49, 0xC0 | (t << 3)], "TILEZERO tmm%d" % t)

LDTILECFG_AX = bytes_([0xC4, 0xE2, 0x78, 0x49, 0x00], "LDTILECFG [AX]")
TILERELEASE = bytes_([0xC4, 0xE2, 0x78, 0x49, 0xC0], "TILERELEASE")

# sanity against the existing hand encodings
assert mem_tile(0x4B, 3, 1, 'DI', 'BX', 0) == [0xC4,0xE2,0x7B,0x4B,0x0C,0x1F]
assert mem_tile(0x4B, 3, 2, 'SI', 'CX', 0) == [0xC4,0xE2,0x7B,0x4B,0x14,0x0E]
assert mem_tile(0x4B, 3, 2, 'R11', 'CX', 0) == [0xC4,0xC2,0x7B,0x4B,0x14,0x0B]
assert mem_tile(0x4B, 3, 0, 'DI', 'CX', 576) == [0xC4,0xE2,0x7B,0x4B,0x84,0x0F,0x40,0x02,0x00,0x00]
assert mem_tile(0x4B, 2, 0, 'DX', 'CX', 0) == [0xC4,0xE2,0x7A,0x4B,0x04,0x0A]
assert vex3(False,False,False,2,0,2,0,2)+[0x5E,0xC1] == [0xC4,0xE2,0x6A,0x5E,0xC1]

A0, A1, B0, B1 = 0, 1, 2, 3
C = {(0, 0): 4, (0, 1): 5, (1, 0): 6, (1, 1): 7}  # (panel, group) -> tmm
PB = 576  # panel bytes per block

def convert(out, q4, blk, dst):
    # B of block b+1 (at blk(SI), blk(R8)) → signed int8 in the slot at dst
    for gi, src in enumerate(("SI", "R8")):
        base = 512 * gi
        if q4:
            for q in range(4):
                out.append("\tVMOVDQU32 %d(%s), Z8" % (blk + 64 * q, src))
                out.append("\tVPANDD Z15, Z8, Z9")
                out.append("\tVPSRLW $4, Z8, Z8")
                out.append("\tVPANDD Z15, Z8, Z8")
                out.append("\tVPSUBB Z14, Z9, Z9")
                out.append("\tVPSUBB Z14, Z8, Z8")
                out.append("\tVMOVDQU32 Z9, %d(%s)" % (base + 64 * q, dst))
                out.append("\tVMOVDQU32 Z8, %d(%s)" % (base + 256 + 64 * q, dst))
        else:
            for q in range(8):
                out.append("\tVPXORD %d(%s), Z14, Z%d" % (blk + 64 * q, src, 8 + q % 4))
                out.append("\tVMOVDQU32 Z%d, %d(%s)" % (8 + q % 4, base + 64 * q, dst))

def post(out):
    # previous block's four C tiles (R9) scaled into the accumulators (R12)
    out.append("\tVCVTPH2PS -32(SI), Z12")
    out.append("\tVCVTPH2PS -32(R8), Z13")
    k = 0
    for p, pan in ((0, "DI"), (1, "R13")):
        for gi in (0, 1):
            c = 2 * p + gi
            for t in range(16):
                z0, z1 = 2 * (k % 4), 2 * (k % 4) + 1
                k += 1
                acc = gi * 2048 + (16 * p + t) * 64
                out.append("\tVCVTDQ2PS %d(R9), Z%d" % (c * 1024 + 64 * t, z0))
                out.append("\tVMULPS.BCST %d(%s), Z%d, Z%d" % (-PB + 512 + 4 * t, pan, 12 + gi, z1))
                out.append("\tVFMADD213PS %d(R12), Z%d, Z%d" % (acc, z1, z0))
                out.append("\tVMOVUPS Z%d, %d(R12)" % (z0, acc))

def tiles(out):
    # loads and products of block b; its stores come after the previous
    # block's scaling (stores(), block())
    out.append(tileloadd(B0, "R11", "CX"))
    out.append(tileloadd(B1, "R11", "CX", 512))
    out.append(tileloadd(A0, "DI", "BX"))
    out.append(tileloadd(A1, "R13", "BX"))
    for (p, gi), c in C.items():
        out.append(tilezero(c))
    for (p, gi), c in C.items():
        out.append(tdp("bssd", c, A0 if p == 0 else A1, B0 if gi == 0 else B1))

def stores(out):
    for (p, gi), c in C.items():
        out.append(tilestored(c, "DX", "CX", (2 * p + gi) * 1024))

def block(out, q4, blk, first, last):
    if not last:
        convert(out, q4, blk, "R14")
    # The C tiles go to scratch right after their products, the previous
    # block's scaling after them: the tile chain (loads, products, stores)
    # bounds the kernel, and vector work placed between a product and its
    # store measured 5-10% slower (TestTileSpeed), between two products
    # 30% slower.
    tiles(out)
    stores(out)
    if not first:
        post(out)
    out.append("\tXCHGQ DX, R9")
    out.append("\tXCHGQ R11, R14")
    out.append("\tADDQ $%d, SI" % blk)
    out.append("\tADDQ $%d, R8" % blk)
    out.append("\tADDQ $%d, DI" % PB)
    out.append("\tADDQ $%d, R13" % PB)

def kernel(name, q4):
    blk = 288 if q4 else 544
    out = []
    out.append("// func %s(w0, w1 *byte, ap *byte, nb, npp int, acc *float32, cfg *[64]byte, scratch *byte)" % name)
    out.append("TEXT ·%s(SB), NOSPLIT, $0-64" % name)
    out.append("\tMOVQ cfg+48(FP), AX")
    out.append(LDTILECFG_AX)
    out.append("\tMOVQ ap+16(FP), DI")
    out.append("\tMOVQ acc+40(FP), R12")
    out.append("\tMOVQ $32, BX")
    out.append("\tMOVQ $64, CX")
    if q4:
        out.append("\tMOVL $0x0f0f0f0f, AX")
        out.append("\tVPBROADCASTD AX, Z15")
        out.append("\tMOVL $0x08080808, AX")
        out.append("\tVPBROADCASTD AX, Z14")
    else:
        out.append("\tMOVL $0x80808080, AX")
        out.append("\tVPBROADCASTD AX, Z14")
    out.append("")
    out.append("%s_pair:" % name)
    out.append("\tMOVQ w0+0(FP), SI")
    out.append("\tMOVQ w1+8(FP), R8")
    out.append("\tMOVQ nb+24(FP), R10")
    out.append("\tLEAQ (R10)(R10*8), AX")  # nb*9
    out.append("\tSHLQ $6, AX")  # nb*576
    out.append("\tLEAQ (DI)(AX*1), R13")
    out.append("\tMOVQ scratch+56(FP), R11")
    out.append("\tLEAQ 1024(R11), R14")
    out.append("\tLEAQ 2048(R11), DX")
    out.append("\tLEAQ 6144(R11), R9")
    out.append("\tVPXORD Z0, Z0, Z0")
    for i in range(64):
        out.append("\tVMOVUPS Z0, %d(R12)" % (64 * i))
    # block 0's B into the slot at R11
    convert(out, q4, 0, "R11")
    out.append("\tCMPQ R10, $1")
    out.append("\tJEQ  %s_one" % name)
    block(out, q4, blk, True, False)
    out.append("\tSUBQ $2, R10")
    out.append("\tJZ   %s_final" % name)
    out.append("%s_block:" % name)
    block(out, q4, blk, False, False)
    out.append("\tDECQ R10")
    out.append("\tJNZ  %s_block" % name)
    out.append("%s_final:" % name)
    block(out, q4, blk, False, True)
    out.append("\tJMP  %s_tail" % name)
    out.append("%s_one:" % name)
    block(out, q4, blk, True, True)
    out.append("%s_tail:" % name)
    post(out)
    # next pair: DI is at the end of panel 0, R13 at the end of panel 1
    out.append("\tMOVQ R13, DI")
    out.append("\tADDQ $4096, R12")
    out.append("\tDECQ npp+32(FP)")
    out.append("\tJNZ  %s_pair" % name)
    out.append(TILERELEASE)
    out.append("\tVZEROUPPER")
    out.append("\tRET")
    return "\n".join(out) + "\n"

HEADER = '''//go:build amd64 && !purego

#include "textflag.h"

// AMX-INT8 tiles for Int8-mode prefill of q4_0 and q8_0 (level AMX),
// written out by scripts/gen-amx-asm.py (the Go assembler has no AMX
// mnemonics: the tile instructions are encoded as bytes, each with its
// mnemonic in a comment). Edit the script, not this file.
//
// A call computes two 16-row weight groups (w0, w1: their packed int8
// tiles, gemm_int8.go) against npp pairs of 16-token panels (ap,
// packAMXPanels: per block 16 tokens × 32 int8, then their 16 float32
// scales; a pair's second panel follows its first). Per 32-column block:
// the two groups' weights are made signed int8 in scratch (q4_0: the
// nibbles minus 8; q8_0: the stored w+128 back to w), a block ahead of
// their tile load (a tile load does not take data from pending stores);
// the four products TDPBSSD C(p,g) = A(p)·B(g) (tmm0-1 A, tmm2-3 B,
// tmm4-7 C) are stored to scratch, and after them (while the tile unit
// still works) the previous block's are scaled (weight scale × token scale) and added
// into the float32 accumulators acc (per pair 4 KiB: group g, token t of
// the pair at acc[512·g + 16·t], 16 rows). scratch: B slots at 0 and
// 1024 (a group each 512 bytes), C slots at 2048 and 6144 (4 KiB each).
// Computed tiles per block: two tile loads per four products, where one
// product per group and panel needed three.

'''

if __name__ == "__main__":
    sys.stdout.write(HEADER + kernel("gemmQ4_0AMX", True) + "\n" + kernel("gemmQ8_0AMX", False))

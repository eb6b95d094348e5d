package shaders

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// allModules lists every module variant the backend can ask for.
func allModules(t *testing.T) map[string]string {
	mods := map[string]string{"rmsnorm": RMSNorm(false), "rmsnorm/ip": RMSNorm(true)}
	for _, c := range Codecs {
		src, err := Embed(c)
		if err != nil {
			t.Fatal(err)
		}
		mods["embed/"+c.String()] = src
		for _, tb := range []int{1, 8} {
			src, err := Matmul(c, tb)
			if err != nil {
				t.Fatal(err)
			}
			mods["matmul/"+c.String()+"/"+string(rune('0'+tb))] = src
		}
	}
	for _, c := range Codecs {
		for _, norm := range []bool{false, true} {
			src, err := Matvec(c, MatvecShape{Rows: 4, Sets: 2, Groups: 2}, 2048, norm)
			if err != nil {
				t.Fatal(err)
			}
			mods["matvec/"+c.String()+map[bool]string{false: "", true: "/norm"}[norm]] = src
		}
	}
	for _, hd := range []int{64, 128} {
		src, err := AttnPrefill(hd)
		if err != nil {
			t.Fatal(err)
		}
		mods[fmt.Sprintf("attn_prefill/%d", hd)] = src
		if src, err = AttnPrefillKV(hd, AttnPrefillBlock, true); err != nil {
			t.Fatal(err)
		}
		mods[fmt.Sprintf("attn_prefill/%d/kv_f16", hd)] = src
	}
	for _, n := range []string{QKVPrep, Attention} {
		src, err := SourceKV(n, true)
		if err != nil {
			t.Fatal(err)
		}
		mods[n+"/kv_f16"] = src
	}
	for _, n := range []string{QKVPrep, Attention, Combine, ActMul, Argmax, ArgmaxPart, Advance} {
		src, err := Source(n)
		if err != nil {
			t.Fatal(err)
		}
		mods[n] = src
	}
	return mods
}

// The browser and wgpu-native subset: these never appear.
func TestSubset(t *testing.T) {
	for name, src := range allModules(t) {
		for _, bad := range []string{"__", "enable f16", "override ", "subgroup", "dot4I8Packed", "f16>", ": f16", "<f16"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		if !strings.Contains(src, "@compute") {
			t.Errorf("%s has no entry point", name)
		}
	}
	if _, err := Matmul(tensor.BF16, 1); err == nil {
		t.Error("bf16 matmul module produced (bf16 widens to f32 at load)")
	}
	if _, err := Matmul(tensor.F32, 0); err == nil {
		t.Error("token block 0 accepted")
	}
	if _, err := Source("nope"); err == nil {
		t.Error("unknown module accepted")
	}
}

func TestRepack(t *testing.T) {
	// Two q8_0 blocks: scales 0x3c00 (1.0) and 0x4000 (2.0).
	src := make([]byte, 68)
	src[0], src[1] = 0x00, 0x3c
	src[34], src[35] = 0x00, 0x40
	for i := 0; i < 32; i++ {
		src[2+i] = byte(i)
		src[36+i] = byte(100 + i)
	}
	out, soff, err := RepackQ8_0(src)
	if err != nil {
		t.Fatal(err)
	}
	if soff != 16 || len(out) != 64+4 {
		t.Fatalf("soff %d len %d", soff, len(out))
	}
	if out[0] != 0 || out[31] != 31 || out[32] != 100 || !bytes.Equal(out[64:], []byte{0x00, 0x3c, 0x00, 0x40}) {
		t.Fatalf("layout % x", out)
	}
	if _, _, err := RepackQ4_0(make([]byte, 19)); err == nil {
		t.Error("partial q4_0 block accepted")
	}
}

func FuzzRepack(f *testing.F) {
	f.Add(make([]byte, 34), true)
	f.Add(make([]byte, 36), false)
	f.Add([]byte{1, 2, 3}, true)
	f.Fuzz(func(t *testing.T, src []byte, q8 bool) {
		bb, qb := 18, 16
		rep := RepackQ4_0
		if q8 {
			bb, qb, rep = 34, 32, RepackQ8_0
		}
		out, soff, err := rep(src)
		if len(src)%bb != 0 {
			if err == nil {
				t.Fatal("accepted a partial block")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n := len(src) / bb
		if int(soff)*4 != n*qb || len(out)%4 != 0 || len(out) < n*(qb+2) {
			t.Fatalf("soff %d len %d for %d blocks", soff, len(out), n)
		}
		for b := 0; b < n; b++ {
			if !bytes.Equal(out[b*qb:(b+1)*qb], src[b*bb+2:(b+1)*bb]) || out[n*qb+2*b] != src[b*bb] || out[n*qb+2*b+1] != src[b*bb+1] {
				t.Fatalf("block %d misplaced", b)
			}
		}
	})
}

// TestRepackQ4_K decodes the repacked layout as codec_q4_K.wgsl reads it
// (sub-block s at bytes 16+16s, element l's nibble in byte l%16, high
// nibble from l 16 on) and checks every value against GGUF's decoding.
func TestRepackQ4_K(t *testing.T) {
	const n = 3 * 256
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32((i*7919)%97) - 40
	}
	raw := make([]byte, 3*144)
	if err := tensor.Quantize(raw, tensor.Q4_K, vals); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, n)
	if err := tensor.Dequantize(want, tensor.Q4_K, raw); err != nil {
		t.Fatal(err)
	}
	dev, err := RepackQ4_K(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RepackQ4_K(nil, raw[:100]); err == nil {
		t.Error("a partial block was accepted")
	}
	for e := 0; e < n; e++ {
		b, j, l := e/256, (e%256)/32, e%32
		blk := dev[144*b:]
		hdr := func(i int) uint32 { return binary.LittleEndian.Uint32(blk[4*i:]) }
		sc := hdr(1)>>(4*j)&0xF | (hdr(3)>>(2*j)&3)<<4
		m := hdr(2)>>(4*j)&0xF | (hdr(3)>>(16+2*j)&3)<<4
		d := tensor.F16ToF32(binary.LittleEndian.Uint16(blk[0:]))
		dmin := tensor.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		q := blk[16+16*j+l%16] >> (4 * (l / 16)) & 0xF
		if got := d*float32(sc)*float32(q) - dmin*float32(m); got != want[e] {
			t.Fatalf("element %d: %v, want %v", e, got, want[e])
		}
	}
}

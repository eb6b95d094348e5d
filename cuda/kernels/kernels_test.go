package kernels

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unsafe"
)

// TestPTXFresh fails when a kernel source, the PTX or the fatbin differs
// from what `make cuda-kernels` recorded in kernels.sha256 (the embedded
// image is stale).
func TestPTXFresh(t *testing.T) {
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(SourceSums), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("kernels.sha256: bad line %q", line)
		}
		sums[strings.TrimPrefix(f[1], "*")] = f[0]
	}
	srcs, _ := filepath.Glob("*.cu")
	hdrs, _ := filepath.Glob("*.cuh")
	srcs = append(srcs, hdrs...)
	sort.Strings(srcs)
	if len(srcs) == 0 {
		t.Fatal("no .cu sources beside the test")
	}
	for _, name := range srcs {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		switch want, ok := sums[name]; {
		case !ok:
			t.Errorf("%s is not in kernels.sha256: the PTX was built without it; run `make cuda-kernels` (needs nvcc)", name)
		case want != hex.EncodeToString(h[:]):
			t.Errorf("%s changed since the PTX was built: run `make cuda-kernels` (needs nvcc) and commit kernels.ptx, kernels.fatbin and kernels.sha256", name)
		}
		delete(sums, name)
	}
	h := sha256.Sum256(PTX)
	if want := sums["kernels.ptx"]; want != hex.EncodeToString(h[:]) {
		t.Errorf("kernels.ptx is not the one `make cuda-kernels` recorded: run it again")
	}
	delete(sums, "kernels.ptx")
	h = sha256.Sum256(Image)
	if want := sums["kernels.fatbin"]; want != hex.EncodeToString(h[:]) {
		t.Errorf("the embedded kernels.fatbin is not the one `make cuda-kernels` recorded: run it again")
	}
	delete(sums, "kernels.fatbin")
	for name := range sums {
		t.Errorf("kernels.sha256 names %s, which is gone: run `make cuda-kernels`", name)
	}
}

// TestPTXEntries checks that every kernel the ABI names is an entry of the PTX.
func TestPTXEntries(t *testing.T) {
	entries := map[string]bool{}
	for _, m := range regexp.MustCompile(`\.entry\s+(\w+)\s*\(`).FindAllSubmatch(PTX, -1) {
		entries[string(m[1])] = true
	}
	var names []string
	for _, c := range Codecs {
		names = append(names, EmbedPrefix+c, MatvecPrefix+c, MatvecBatchPrefix+c, GemmPrefix+c)
	}
	for _, c := range Int8Codecs {
		names = append(names, MatvecInt8Prefix+c, GemmQPrefix+c, GemmQSmallPrefix+c)
	}
	for _, k := range []string{"f32", "f16"} {
		names = append(names, KVWritePrefix+k, AttnDecodePrefix+k, AttnPrefillPrefix+k, RopeKVPrefix+k, FAPrefillPrefix+k,
			FlashName(k, 64), FlashName(k, 128))
	}
	names = append(names, RMSNorm, AddRMSNorm, Add, Rope, AttnCombine, ActMul, ArgmaxRows, ArgmaxStep, Advance, QuantQ8)
	names = append(names, DiTNames()...)
	for _, p := range MatvecPairs {
		names = append(names, MatvecPairName(p[0], p[1]))
	}
	for _, k := range []string{"f32", "f16"} {
		for _, hg := range [][2]int{{16, 4}, {64, 4}, {64, 8}, {128, 4}, {128, 8}} {
			names = append(names, Decode1Name(k, hg[0], hg[1], 1))
		}
	}
	for _, n := range names {
		if !entries[n] {
			t.Errorf("kernel %s is not in kernels.ptx", n)
		}
	}
	if len(entries) != len(names) {
		t.Errorf("kernels.ptx has %d entries, the ABI names %d", len(entries), len(names))
	}
}

func TestRepack(t *testing.T) {
	// Two q4_0 rows of 64 columns: blocks (d, 16 qs) → qs, qs, d, d.
	var src []byte
	for r := range 2 {
		for b := range 2 {
			d := make([]byte, 2)
			binary.LittleEndian.PutUint16(d, uint16(0x3c00+r*2+b))
			src = append(src, d...)
			src = append(src, bytes.Repeat([]byte{byte(16*r + 4*b + 1)}, 16)...)
		}
	}
	rb := DeviceRowBytes("q4_0", 64)
	if rb != 48 {
		t.Fatalf("DeviceRowBytes(q4_0, 64) = %d, want 48 (36 padded to 16)", rb)
	}
	dst := make([]byte, 2*rb)
	if err := Repack("q4_0", 2, 64, src, dst); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		row := dst[r*rb : (r+1)*rb]
		for b := range 2 {
			if q := row[b*16]; q != byte(16*r+4*b+1) {
				t.Errorf("row %d block %d: qs %d", r, b, q)
			}
			if d := binary.LittleEndian.Uint16(row[32+2*b:]); d != uint16(0x3c00+r*2+b) {
				t.Errorf("row %d block %d: d %#x", r, b, d)
			}
		}
		if !bytes.Equal(row[36:], make([]byte, 12)) {
			t.Errorf("row %d: padding not zero", r)
		}
	}
	// q6_K: d moves from the block's end to the row's tail.
	blk := make([]byte, 210)
	for i := range blk {
		blk[i] = byte(i)
	}
	out := make([]byte, DeviceRowBytes("q6_K", 256))
	if err := Repack("q6_K", 1, 256, blk, out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:208], blk[:208]) || out[208] != 208 || out[209] != 209 || len(out) != 224 {
		t.Errorf("q6_K repack: %v", out[200:])
	}
	if err := Repack("q4_0", 1, 48, src, dst); err == nil {
		t.Error("a 48-column q4_0 row was accepted")
	}
	if err := Repack("iq2_xs", 1, 256, src, dst); err == nil {
		t.Error("an unsupported codec was accepted")
	}
}

func TestChecks(t *testing.T) {
	if err := CheckMatrix("q4_K", 2048, 2048, true); err != nil {
		t.Error(err)
	}
	if CheckMatrix("q4_K", 2048, 896, false) == nil || CheckMatrix("q4_0", 10, 96, true) == nil || CheckMatrix("iq2_xs", 1, 256, false) == nil {
		t.Error("a shape the kernels cannot run was accepted")
	}
	if err := CheckAttention(32, 8, 64); err != nil {
		t.Error(err)
	}
	if CheckAttention(32, 6, 64) == nil || CheckAttention(8, 8, 512) == nil || CheckAttention(32, 1, 128) == nil {
		t.Error("an attention shape the kernels cannot run was accepted")
	}
	// The int8 prefill GEMM: 48 KiB of shared memory at 128-token tiles
	// (no opt-in), 64-token tiles only where 128 fill at most half the SMs.
	if g := (&GemmQArgs{Rows: 3072, Cols: 2048, T: 512}).Launch(); g.Grid != [3]uint32{24, 4, 1} || g.Shared != 48<<10 || g.NeedsOptIn() {
		t.Errorf("int8 GEMM geometry %+v", g)
	}
	if g := (&GemmQArgs{Rows: 2048, Cols: 2048, T: 512, Small: true}).Launch(); g.Grid != [3]uint32{16, 8, 1} || g.Shared != 36864 {
		t.Errorf("int8 GEMM 64-token geometry %+v", g)
	}
	if !GemmQSmall(512, 2048, 132) || GemmQSmall(512, 3072, 132) || GemmQSmall(2048, 2048, 132) || GemmQSmall(512, 2048, 0) {
		t.Error("GemmQSmall: 64-token tiles chosen where 128 fill the device, or not where they fill half")
	}
	if q, ds := QuantBytes(2048, 8192); q != 2048*8192 || ds != 2048*256*8 {
		t.Errorf("QuantBytes(2048, 8192) = %d, %d", q, ds)
	}
	if g := (&QuantQ8Args{T: 7, Cols: 2080}).Launch(); g.Grid != [3]uint32{3, 7, 1} || g.Block[0] != 256 {
		t.Errorf("quant geometry %+v", g)
	}
	if g := (&AttnPrefillArgs{T: 2048, Heads: 32, HeadDim: 64}).LaunchFlash(); g.Grid != [3]uint32{32, 32, 1} || g.Shared != 2*64*72*2+2*64*64*4 || !g.NeedsOptIn() {
		t.Errorf("flash prefill geometry %+v", g)
	}
	if FlashName("f16", 128) != "ck_flash_prefill_f16_128" {
		t.Errorf("FlashName(f16, 128) = %s", FlashName("f16", 128))
	}
	g := (&MatvecArgs{Rows: 128256, Cols: 2048}).LaunchInt8()
	if g.Grid[0] != 2004 || g.Block[0] != 512 || g.Shared != 2048+512 {
		t.Errorf("lm head int8 geometry %+v", g)
	}
}

// ptxParamTypes is the .param types (u64, u32, f32) of PTX entry name.
func ptxParamTypes(t *testing.T, name string) []string {
	t.Helper()
	i := bytes.Index(PTX, []byte(".entry "+name+"("))
	if i < 0 {
		t.Fatalf("no entry %s in kernels.ptx", name)
	}
	end := bytes.IndexByte(PTX[i:], ')')
	var types []string
	for _, m := range regexp.MustCompile(`\.param \.(\w+) `).FindAllSubmatch(PTX[i:i+end], -1) {
		types = append(types, string(m[1]))
	}
	return types
}

// goParamTypes is the PTX type of the field each of a.Params() points at.
func goParamTypes(t *testing.T, a interface{ Params() []unsafe.Pointer }) []string {
	t.Helper()
	v := reflect.ValueOf(a).Elem()
	base := v.UnsafeAddr()
	var types []string
	for _, p := range a.Params() {
		off := uintptr(p) - base
		kind := ""
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Offset != off {
				continue
			}
			switch f.Type {
			case reflect.TypeOf(Ptr(0)):
				kind = "u64"
			case reflect.TypeOf(int32(0)):
				kind = "u32"
			case reflect.TypeOf(float32(0)):
				kind = "f32"
			}
		}
		if kind == "" {
			t.Fatalf("%T: parameter at offset %d is no Ptr, int32 or float32 field", a, off)
		}
		types = append(types, kind)
	}
	return types
}

// TestParamsMatchPTX: the argument structs pass exactly the kernels'
// parameters, in order and type (a mismatch would read garbage on the
// device, which no CPU-only test would see).
func TestParamsMatchPTX(t *testing.T) {
	for _, c := range []struct {
		kernel string
		args   interface{ Params() []unsafe.Pointer }
	}{
		{Decode1Name("f32", 64, 4, 1), &AttnDecode1Args{}},
		{Decode1Name("f16", 128, 8, 1), &AttnDecode1Args{}},
		{Decode1Name("f32", 16, 2, 1), &AttnDecode1Args{}},
		{AttnDecodePrefix + "f32", &AttnDecodeArgs{}},
		{AttnCombine, &AttnCombineArgs{}},
		{RopeKVPrefix + "f16", &RopeKVArgs{}},
		{MatvecInt8Prefix + "q8_0", &MatvecArgs{}},
		{MatvecPairName("q4_K", "q6_K"), &MatvecPairArgs{}},
		{MatvecPrefix + "q4_0", &MatvecArgs{}},
		{MatvecBatchPrefix + "q4_K", &MatvecBatchArgs{}},
		{EmbedPrefix + "q6_K", &EmbedArgs{}},
		{RMSNorm, &RMSNormArgs{}},
		{AddRMSNorm, &AddRMSNormArgs{}},
		{Add, &AddArgs{}},
		{Rope, &RopeArgs{}},
		{KVWritePrefix + "f32", &KVWriteArgs{}},
		{AttnPrefillPrefix + "f16", &AttnPrefillArgs{}},
		{FAPrefillPrefix + "f32", &AttnPrefillArgs{}},
		{ActMul, &ActMulArgs{}},
		{ArgmaxRows, &ArgmaxRowsArgs{}},
		{ArgmaxStep, &ArgmaxStepArgs{}},
		{Advance, &AdvanceArgs{}},
	} {
		want, got := ptxParamTypes(t, c.kernel), goParamTypes(t, c.args)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: %T passes %v, the PTX takes %v", c.kernel, c.args, got, want)
		}
	}
}

// TestDecode1Name: the one-pass decode attention serves head dims 64 and
// 128 with groups up to 8 (16 with groups up to 4), at most
// Decode1MaxSplits splits; anything else is left to the two-pass kernels.
func TestDecode1Name(t *testing.T) {
	for _, c := range []struct {
		kv        string
		hd, group int
		nsplit    int32
		want      string
	}{
		{"f32", 64, 4, 33, "ck_attn_dec1_f32_64_4"},
		{"f16", 64, 1, 33, "ck_attn_dec1_f16_64_4"},
		{"f32", 128, 7, 64, "ck_attn_dec1_f32_128_8"},
		{"f16", 128, 8, 1, "ck_attn_dec1_f16_128_8"},
		{"f32", 16, 2, 64, "ck_attn_dec1_f32_16_4"},
		{"f32", 16, 8, 64, ""},
		{"f32", 96, 4, 33, ""},
		{"f32", 256, 2, 33, ""},
		{"f32", 64, 9, 33, ""},
		{"f32", 64, 4, 65, ""},
		{"f32", 64, 4, 0, ""},
		{"q8_0", 64, 4, 33, ""},
	} {
		if got := Decode1Name(c.kv, c.hd, c.group, c.nsplit); got != c.want {
			t.Errorf("Decode1Name(%s, %d, %d, %d) = %q, want %q", c.kv, c.hd, c.group, c.nsplit, got, c.want)
		}
	}
}

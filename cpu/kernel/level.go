package kernel

import (
	"fmt"
	"slices"
	"sync"
)

// Level is a set of instruction-set extensions the kernels may use. Each
// architecture has its own levels above Generic (Levels lists this
// build's), ordered: each one uses the instructions of those below it.
// At start-up the package picks DefaultLevel (the highest level the CPU
// supports); SetLevel changes it, up to Detected, for tests
// and for users who want another (the command line's CORTIQ_CPU_LEVEL).
//
// Exact-mode results are the same at every level up to the order of
// float32 additions (see the package documentation); Int8-mode results
// are the same integer arithmetic at every SIMD level.
type Level int32

const (
	// Generic is the portable Go code (the only level off amd64 and arm64).
	Generic Level = iota
	// AVX2 is AVX2 + FMA + F16C (x86-64-v3).
	AVX2
	// AVX512 adds AVX-512 F, BW and VL: 512-bit int8 dots (VPMADDUBSW).
	AVX512
	// AVX512VNNI adds AVX-512 VNNI: VPDPBUSD int8 dots for Int8-mode
	// decode and the int8 GEMM of Int8-mode prefill.
	AVX512VNNI
	// AMX adds AMX-INT8 tiles for the Int8-mode prefill of q4_0, q8_0
	// and q5_0 (Linux, which must grant the process the tile state):
	// products of 32 tokens or more, two weight groups by two 16-token
	// panels a step, 10-20% less CPU than AVX512VNNI's tiles at 64
	// tokens on a Sapphire Rapids VM. Results are those of AVX512VNNI
	// bit for bit (the same integer block sums, scaled and added in the
	// same order), and everything else is AVX512VNNI's.
	AMX
	// NEON is arm64's Advanced SIMD (every arm64 CPU): f32 dots with 16
	// partial sums, f16, bf16, q4_K and q6_K dots, MatMul's f32 tile, and
	// Int8-mode q8_0, q4_0, q4_K and q6_K with widening multiplies (SMULL).
	NEON
	// NEONDot adds the dot-product extension (FEAT_DotProd: SDOT) to the
	// Int8 block dots.
	NEONDot
)

// DefaultLevel is the level the package starts at: the highest the CPU
// supports.
func DefaultLevel() Level { return detected }

var levelNames = [...]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512", AVX512VNNI: "avx512vnni", AMX: "amx", NEON: "neon", NEONDot: "neondot"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", int32(l))
}

// ParseLevel parses a level name as String writes it.
func ParseLevel(s string) (Level, error) {
	for l, n := range levelNames {
		if n == s {
			return Level(l), nil
		}
	}
	return Generic, fmt.Errorf("unknown CPU kernel level %q (want one of generic, avx2, avx512, avx512vnni, amx, neon, neondot)", s)
}

// Levels lists the levels of this build's architecture, lowest first
// (Generic alone off amd64 and arm64, and with -tags purego), whether or
// not this CPU has them.
func Levels() []Level { return slices.Clone(archLevels) }

// Detected reports the highest level this CPU and build support (the
// limit of SetLevel).
func Detected() Level { return detected }

var (
	levelMu sync.Mutex
	level   = Generic
)

func init() { applyLevel(DefaultLevel()) }

// SetLevel selects the kernels of level l, or of Detected() if l is
// higher, and returns the level now in effect. A level of another
// architecture (not in Levels) selects Generic. Calls must not overlap
// kernel calls in flight (set it at start-up, or between tests).
func SetLevel(l Level) Level {
	levelMu.Lock()
	defer levelMu.Unlock()
	if !slices.Contains(archLevels, l) {
		l = Generic
	}
	l = min(l, detected)
	applyLevel(l)
	return l
}

// CurrentLevel reports the level in effect.
func CurrentLevel() Level {
	levelMu.Lock()
	defer levelMu.Unlock()
	return level
}

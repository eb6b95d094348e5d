package kernel

import (
	"fmt"
	"sync"
)

// Level is a set of instruction-set extensions the kernels may use. The
// levels are ordered: each one uses the instructions of those below it.
// At start-up the package picks DefaultLevel (the highest level the CPU
// supports, AMX excepted); SetLevel changes it, up to Detected, for tests
// and for users who want another (the command line's CORTIQ_CPU_LEVEL).
//
// Exact-mode results are the same at every level up to the order of
// float32 additions (see the package documentation); Int8-mode results
// are the same integer arithmetic at every SIMD level.
type Level int32

const (
	// Generic is the portable Go code (the only level off amd64).
	Generic Level = iota
	// AVX2 is AVX2 + FMA + F16C (x86-64-v3).
	AVX2
	// AVX512 adds AVX-512 F, BW and VL: 512-bit int8 dots (VPMADDUBSW).
	AVX512
	// AVX512VNNI adds AVX-512 VNNI: VPDPBUSD int8 dots for Int8-mode
	// decode and the int8 GEMM of Int8-mode prefill.
	AVX512VNNI
	// AMX adds AMX-INT8 tiles for the Int8-mode prefill of q4_0 and q8_0
	// (Linux, which must grant the process the tile state). It is not
	// chosen by default (see DefaultLevel): on the shared VM it was
	// measured on, its prefill was no faster than AVX512VNNI's and at
	// times much slower; SetLevel(AMX) opts in.
	AMX
)

// DefaultLevel is the level the package starts at: the highest the CPU
// supports, but at most AVX512VNNI.
func DefaultLevel() Level { return min(detected, AVX512VNNI) }

var levelNames = [...]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512", AVX512VNNI: "avx512vnni", AMX: "amx"}

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
	return Generic, fmt.Errorf("unknown CPU kernel level %q (want one of generic, avx2, avx512, avx512vnni, amx)", s)
}

// Detected reports the highest level this CPU and build support (the
// limit of SetLevel).
func Detected() Level { return detected }

var (
	levelMu sync.Mutex
	level   = Generic
)

func init() { applyLevel(DefaultLevel()) }

// SetLevel selects the kernels of level l, or of Detected() if l is
// higher, and returns the level now in effect. Calls must not overlap
// kernel calls in flight (set it at start-up, or between tests).
func SetLevel(l Level) Level {
	levelMu.Lock()
	defer levelMu.Unlock()
	l = max(Generic, min(l, detected))
	applyLevel(l)
	return l
}

// CurrentLevel reports the level in effect.
func CurrentLevel() Level {
	levelMu.Lock()
	defer levelMu.Unlock()
	return level
}

package kernels

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// PTX is kernels.ptx: the fatbin's compute_80 PTX as text, which the
// binary does not carry; the tests read the kernels' entries and parameter
// types from it (TestPTXFresh ties it to the sources and the fatbin).
var PTX, _ = os.ReadFile("kernels.ptx")

func TestImage(t *testing.T) {
	if len(PTX) == 0 {
		t.Fatal("no kernels.ptx beside the test: run `make cuda-kernels` (needs nvcc)")
	}
	if len(Image) < 4 || binary.LittleEndian.Uint32(Image) != fatbinMagic {
		t.Fatal("the embedded kernels.fatbin is not a fatbin: run `make cuda-kernels` (needs nvcc)")
	}
	for _, c := range []struct {
		image        []byte
		major, minor int
		want         bool
	}{
		{Image, 9, 0, true},
		{Image, 8, 0, false},  // Ampere's cubin does not wait
		{Image, 8, 9, false},  // Ada: the PTX, JIT-compiled
		{Image, 10, 0, false}, // Blackwell: the PTX, JIT-compiled
		{PTX, 9, 0, false},    // PTX text (CORTIQ_CUDA_PTX): compute_80, no waits
		{nil, 9, 0, false},
	} {
		if got := Dependent(c.image, c.major, c.minor); got != c.want {
			t.Errorf("Dependent(%d bytes, sm_%d%d) = %v, want %v", len(c.image), c.major, c.minor, got, c.want)
		}
	}
}

// TestKernelsWait: every kernel waits for the one before it (ck_pdl, in its
// body or in a device function it calls) before it touches what another
// kernel writes. The decode graphs launch kernels as programmatic
// dependents on sm_90, where one that does not wait would read its
// predecessor's output before it is there; any kernel may end up in such a
// graph, so every one waits (in an ordinary launch ck_pdl costs nothing).
func TestKernelsWait(t *testing.T) {
	srcs, _ := filepath.Glob("*.cu")
	hdrs, _ := filepath.Glob("*.cuh")
	var all strings.Builder
	for _, name := range append(srcs, hdrs...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(regexp.MustCompile(`//[^\n]*`).ReplaceAllString(string(b), ""))
		all.WriteString("\n")
	}
	src := all.String()
	// body returns the braces' contents after the parameter list that
	// starts at i (the index of its '(').
	body := func(i int) string {
		depth := 0
		for ; i < len(src); i++ {
			if src[i] == '(' {
				depth++
			} else if src[i] == ')' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		open := strings.IndexByte(src[i:], '{')
		if open < 0 || strings.ContainsRune(src[i:i+open], ';') {
			return "" // a declaration
		}
		start := i + open
		depth = 0
		for j := start; j < len(src); j++ {
			switch src[j] {
			case '{':
				depth++
			case '}':
				if depth--; depth == 0 {
					return src[start+1 : j]
				}
			}
		}
		return src[start+1:]
	}
	funcs := map[string]string{}
	for _, m := range regexp.MustCompile(`__device__\s+__forceinline__\s+[\w:<>]+\s+(\w+)\s*\(`).FindAllStringSubmatchIndex(src, -1) {
		funcs[src[m[2]:m[3]]] += body(m[1] - 1)
	}
	waits := map[string]bool{"ck_pdl": true}
	calls := func(b string) bool {
		for w := range waits {
			if regexp.MustCompile(`\b` + w + `\s*[<(]`).MatchString(b) {
				return true
			}
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for name, b := range funcs {
			if !waits[name] && calls(b) {
				waits[name], changed = true, true
			}
		}
	}
	n := 0
	for _, m := range regexp.MustCompile(`\bCK\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+(?:\s*##\s*\w+)*)\s*\(`).FindAllStringSubmatchIndex(src, -1) {
		n++
		if name := src[m[2]:m[3]]; !calls(body(m[1] - 1)) {
			t.Errorf("kernel %s does not call ck_pdl() (common.cuh) before it reads or writes what other kernels do", name)
		}
	}
	if n < 20 {
		t.Fatalf("found only %d kernels in the sources", n)
	}
}

package shaders

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	structP = regexp.MustCompile(`struct P\s*\{([^}]*)\}`)
	binding = regexp.MustCompile(`@group\(0\)\s*@binding\((\d+)\)\s*var<([^>]*)>`)
	comment = regexp.MustCompile(`//[^\n]*`)
)

// TestKernelTable checks every source variant of every kernel in the table
// against its entry: its one `struct P` is the one generated from the
// params struct, and the bindings of group 0 are the entry's, kind for
// kind.
func TestKernelTable(t *testing.T) {
	for _, k := range Kernels() {
		t.Run(k.Name, func(t *testing.T) {
			vs, err := k.Variants()
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) == 0 {
				t.Fatal("no source variants")
			}
			if k.Params != nil {
				if got := len(Pack(k.Params)); got != paramsSize(k.Params) || got%16 != 0 {
					t.Fatalf("Pack gives %d bytes", got)
				}
			}
			for name, src := range vs {
				src = comment.ReplaceAllString(src, "")
				ps := structP.FindAllString(src, -1)
				if k.Params == nil {
					if len(ps) != 0 {
						t.Fatalf("%s: a struct P in a kernel without params", name)
					}
				} else if len(ps) != 1 || ps[0]+"\n" != wgslStruct(k.Params) {
					t.Fatalf("%s: struct P %q, want the one generated from %T:\n%s", name, ps, k.Params, wgslStruct(k.Params))
				}
				kinds := map[int]Bind{}
				for _, b := range binding.FindAllStringSubmatch(src, -1) {
					i, _ := strconv.Atoi(b[1])
					var kind Bind
					switch strings.ReplaceAll(b[2], " ", "") {
					case "uniform":
						kind = Uniform
					case "storage,read":
						kind = ReadOnly
					case "storage,read_write":
						kind = ReadWrite
					default:
						t.Fatalf("%s: binding %d is var<%s>", name, i, b[2])
					}
					if _, dup := kinds[i]; dup {
						t.Fatalf("%s: binding %d twice", name, i)
					}
					kinds[i] = kind
				}
				if len(kinds) != len(k.Binds) {
					t.Fatalf("%s: %d bindings in the source, %d in the table", name, len(kinds), len(k.Binds))
				}
				for i, want := range k.Binds {
					if got, ok := kinds[i]; !ok || got != want {
						t.Errorf("%s: binding %d is %v in the source (present %v), %v in the table", name, i, got, ok, want)
					}
				}
			}
		})
	}
}

// TestNoHandWrittenParams: every WGSL file names its params struct
// (//!P) instead of declaring a struct P of its own.
func TestNoHandWrittenParams(t *testing.T) {
	es, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if structP.Match(b) {
			t.Errorf("%s declares struct P: name the params struct with //!P", e.Name())
		}
	}
}

func TestWGSLStruct(t *testing.T) {
	for in, want := range map[string]string{"KVHeads": "kv_heads", "HasBias": "has_bias", "HD": "hd", "Row0": "row0", "QKNorm": "qk_norm", "NIn": "n_in", "E": "e"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%s) = %s, want %s", in, got, want)
		}
	}
	want := "struct P {\n    n: u32,\n    per: u32,\n    _pad0: u32,\n    _pad1: u32,\n}\n"
	if got := wgslStruct(ArgmaxPartParams{}); got != want {
		t.Errorf("ArgmaxPartParams:\n%s\nwant\n%s", got, want)
	}
}

func TestPack(t *testing.T) {
	b := Pack(MatmulParams{Rows: 3, Alpha: 1.5, HasBias: FlagOf(true), Eps: 1e-6})
	if len(b) != 48 {
		t.Fatalf("%d bytes, want 48", len(b))
	}
	want := []byte{3, 0, 0, 0}
	if string(b[:4]) != string(want) || b[16] != 0 || b[19] != 0x3f || b[28] != 1 {
		t.Fatalf("packed % x", b)
	}
	if len(Pack(ArgmaxParams{N: 7})) != 16 {
		t.Fatal("ArgmaxParams is not 16 bytes")
	}
}

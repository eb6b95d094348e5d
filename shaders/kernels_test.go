package shaders

import (
	"reflect"
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

type wgslField struct{ name, typ string }

// goFields flattens a params struct into its 4-byte words: name ("" for
// blank) and WGSL type.
func goFields(t *testing.T, p Params) []wgslField {
	var out []wgslField
	rt := reflect.TypeOf(p)
	for i := range rt.NumField() {
		f := rt.Field(i)
		name := f.Name
		if name == "_" {
			name = ""
		}
		ft, n := f.Type, 1
		if ft.Kind() == reflect.Array {
			if name != "" {
				t.Fatalf("%T.%s: only padding may be an array", p, f.Name)
			}
			ft, n = ft.Elem(), ft.Len()
		}
		var typ string
		switch ft.Kind() {
		case reflect.Uint32:
			typ = "u32"
		case reflect.Int32:
			typ = "i32"
		case reflect.Float32:
			typ = "f32"
		default:
			t.Fatalf("%T.%s: %s is not a WGSL scalar", p, f.Name, ft)
		}
		for range n {
			out = append(out, wgslField{name, typ})
		}
	}
	return out
}

// TestKernelTable checks every source variant of every kernel in the table
// against its entry: the WGSL `struct P` has the params struct's fields in
// order (names without underscores and case, types; a WGSL padding field
// may be a word another variant names), and the bindings of group 0 are
// the entry's, kind for kind.
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
			var want []wgslField
			if k.Params != nil {
				want = goFields(t, k.Params)
				if got := len(Pack(k.Params)); got != paramsSize(k.Params) || got%16 != 0 {
					t.Fatalf("Pack gives %d bytes", got)
				}
			}
			for name, src := range vs {
				src = comment.ReplaceAllString(src, "")
				m := structP.FindStringSubmatch(src)
				if (m == nil) != (k.Params == nil) {
					t.Fatalf("%s: struct P in the source %v, params struct %T", name, m != nil, k.Params)
				}
				if m != nil {
					var got []wgslField
					for _, f := range strings.Split(m[1], ",") {
						if f = strings.TrimSpace(f); f == "" {
							continue
						}
						n, ty, ok := strings.Cut(f, ":")
						if !ok {
							t.Fatalf("%s: struct P field %q", name, f)
						}
						got = append(got, wgslField{strings.TrimSpace(n), strings.TrimSpace(ty)})
					}
					if len(got) != len(want) {
						t.Fatalf("%s: struct P has %d words, %T %d", name, len(got), k.Params, len(want))
					}
					for i, g := range got {
						w := want[i]
						switch {
						case strings.HasPrefix(g.name, "_"):
							// padding here; any 4-byte word in Go
						case w.name == "":
							t.Errorf("%s: word %d is %s in WGSL, padding in %T", name, i, g.name, k.Params)
						case strings.ReplaceAll(g.name, "_", "") != strings.ToLower(w.name):
							t.Errorf("%s: word %d is %s in WGSL, %s in %T", name, i, g.name, w.name, k.Params)
						case g.typ != w.typ:
							t.Errorf("%s: %s is %s in WGSL, %s in %T", name, g.name, g.typ, w.typ, k.Params)
						}
					}
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

package main

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	const origin = "http://127.0.0.1:8080"
	for _, c := range []struct {
		spec       string
		kind       sourceKind
		base, file string
		key        string // "" = check the url- prefix only
	}{
		{"stories260K", sourceName, origin + "/models/stories260K/", "", "stories260K"},
		{"qwen2.5-0.5b_q4", sourceName, origin + "/models/qwen2.5-0.5b_q4/", "", "qwen2.5-0.5b_q4"},
		{"https://hf.co/a/b/resolve/main/model.gguf", sourceFile, "https://hf.co/a/b/resolve/main/", "model.gguf", ""},
		{"/models/x/m.CMF", sourceFile, origin + "/models/x/", "m.CMF", ""},
		{"https://hf.co/a/b/resolve/main", sourceDir, "https://hf.co/a/b/resolve/main/", "", ""},
		{"https://hf.co/a/b/resolve/main/config.json", sourceDir, "https://hf.co/a/b/resolve/main/", "", ""},
		{"./tiny/llama/", sourceDir, origin + "/tiny/llama/", "", ""},
	} {
		s, err := parseSource(c.spec, origin)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if s.Kind != c.kind || s.Base != c.base || s.File != c.file {
			t.Errorf("%q: got kind %d base %q file %q, want %d %q %q", c.spec, s.Kind, s.Base, s.File, c.kind, c.base, c.file)
		}
		if c.key != "" && s.Key != c.key || c.key == "" && !strings.HasPrefix(s.Key, "url-") {
			t.Errorf("%q: key %q", c.spec, s.Key)
		}
		if !validRel(s.Key) || strings.Contains(s.Key, "/") {
			t.Errorf("%q: key %q is not one path element", c.spec, s.Key)
		}
	}
	for _, bad := range []string{"", "  ", "file:///etc/passwd", "javascript:alert(1)", "ftp://x/y.gguf"} {
		if _, err := parseSource(bad, origin); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	a, _ := parseSource("https://a.example/m/model.gguf", origin)
	b, _ := parseSource("https://b.example/m/model.gguf", origin)
	if a.Key == b.Key {
		t.Errorf("two URLs share the cache key %q", a.Key)
	}
}

func TestPickFiles(t *testing.T) {
	want, entry, err := pickFiles([]remoteFile{{Name: "stories260K.gguf", Size: 10}})
	if err != nil || entry != "stories260K.gguf" || len(want) != 1 {
		t.Errorf("single gguf: %v %q %v", want, entry, err)
	}
	hf := []remoteFile{{Name: "config.json"}, {Name: "model.safetensors"}, {Name: "reference.safetensors"},
		{Name: "meta.json"}, {Name: "tokenizer.json"}, {Name: "sub/dir.safetensors"}}
	want, entry, err = pickFiles(hf)
	if err != nil || entry != "" {
		t.Fatalf("hf: %q %v", entry, err)
	}
	var names []string
	for _, f := range want {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "config.json,model.safetensors,tokenizer.json" {
		t.Errorf("hf files %s", got)
	}
	for _, bad := range [][]remoteFile{
		nil,
		{{Name: "a.gguf"}, {Name: "b.gguf"}},
		{{Name: "../x.gguf"}},
		{{Name: "/etc/x.gguf"}},
		{{Name: "config.json"}},
		{{Name: "x.gguf", Size: -1}},
	} {
		if _, _, err := pickFiles(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func TestHFShards(t *testing.T) {
	s, err := hfShards([]byte(`{"weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors", "c": "m-2.safetensors"}}`))
	if err != nil || strings.Join(s, ",") != "m-1.safetensors,m-2.safetensors" {
		t.Errorf("%v %v", s, err)
	}
	for _, bad := range []string{`{}`, `{"weight_map": {"a": "../x"}}`, `{"weight_map": {"a": "d/x"}}`, `nope`} {
		if _, err := hfShards([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestParseManifest(t *testing.T) {
	good := `{"version":1,"source":"x","entry":"m.gguf","files":[{"name":"m.gguf","size":3,"verified":"size"}]}`
	if _, err := parseManifest([]byte(good)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{`{}`, `{"version":2,"files":[{"name":"a","size":1}]}`, `{"version":1,"files":[]}`,
		`{"version":1,"files":[{"name":"../a","size":1}]}`, `{"version":1,"entry":"/x","files":[{"name":"a","size":1}]}`} {
		if _, err := parseManifest([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"version":1,"source":"x","entry":"m.gguf","files":[{"name":"m.gguf","size":3}]}`))
	f.Add([]byte(`{"files":[{"name":"..","size":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest(b)
		if err != nil {
			return
		}
		for _, x := range m.Files {
			if !validRel(x.Name) || x.Size < 0 {
				t.Fatalf("accepted bad entry %+v", x)
			}
		}
	})
}

func FuzzPickFiles(f *testing.F) {
	f.Add("config.json", "model.safetensors", int64(1))
	f.Add("a.gguf", "../b", int64(-1))
	f.Fuzz(func(t *testing.T, a, b string, size int64) {
		want, _, err := pickFiles([]remoteFile{{Name: a, Size: size}, {Name: b}})
		if err != nil {
			return
		}
		for _, x := range want {
			if !validRel(x.Name) {
				t.Fatalf("picked unsafe %q", x.Name)
			}
		}
	})
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		u    string
		want bool
	}{
		{"http://127.0.0.1:8080/models/x/", true},
		{"HTTP://127.0.0.1:8080/models/x/", true},
		{"http://127.0.0.1:8081/models/x/", false},
		{"https://127.0.0.1:8080/models/x/", false},
		{"https://huggingface.co/x/resolve/main/", false},
		{"http://127.0.0.1:8080.evil.example/", false},
		{"/models/x/", false},
		{"::", false},
	} {
		if got := sameOrigin(c.u, "http://127.0.0.1:8080"); got != c.want {
			t.Errorf("sameOrigin(%q) = %v, want %v", c.u, got, c.want)
		}
	}
}

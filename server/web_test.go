package server

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestWebBundleMissing: the page is served from the embedded sources when
// the web directory lacks it, and a missing engine bundle (before `make
// wasm`) is answered with what to do, not a bare 404.
func TestWebBundleMissing(t *testing.T) {
	page := fstest.MapFS{"index.html": {Data: []byte("<h1>embedded</h1>")}, "worker.js": {Data: []byte("//w")}}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "worker.js"), []byte("//disk"), 0o644)
	get := func(url string) (int, string) {
		resp, err := httpClient.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	ts := startServer(t, Config{WebDir: dir, WebPage: page, Token: "t"}, map[string]Model{"m": &fakeModel{}})
	if code, body := get(ts.URL + "/"); code != 200 || body != "<h1>embedded</h1>" {
		t.Errorf("GET / = %d %q, want the embedded page", code, body)
	}
	if code, body := get(ts.URL + "/worker.js"); code != 200 || body != "//disk" {
		t.Errorf("GET /worker.js = %d %q, want the web directory's copy", code, body)
	}
	for _, f := range []string{"/cortiq.wasm", "/wasm_exec.js"} {
		if code, body := get(ts.URL + f); code != 404 || !strings.Contains(body, "make wasm") || !strings.Contains(body, dir) {
			t.Errorf("GET %s = %d %q, want 404 saying to run make wasm and where it looked", f, code, body)
		}
	}
	// A web directory without a page and nothing embedded: say so.
	ts2 := startServer(t, Config{WebDir: t.TempDir(), Token: "t"}, map[string]Model{"m": &fakeModel{}})
	if code, body := get(ts2.URL + "/"); code != 404 || !strings.Contains(body, "no web page here") {
		t.Errorf("GET / without a page = %d %q", code, body)
	}
}

package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// bundleFiles are the build outputs of `make wasm` the page needs.
var bundleFiles = map[string]bool{"cortiq.wasm": true, "wasm_exec.js": true}

// webHandler serves the page at /: a file from Config.WebDir when it has
// it, else from Config.WebPage (the embedded page sources). A missing
// engine bundle (cortiq.wasm, wasm_exec.js) is answered with what to do
// about it rather than a bare 404, and so is a missing page.
func (s *Server) webHandler() http.Handler {
	var layers []fs.FS
	if s.cfg.WebDir != "" {
		layers = append(layers, os.DirFS(s.cfg.WebDir))
	}
	if s.cfg.WebPage != nil {
		layers = append(layers, s.cfg.WebPage)
	}
	files := http.FileServerFS(overlayFS(layers))
	where := "no web directory was given (cortiq serve --web DIR)"
	if s.cfg.WebDir != "" {
		abs, _ := filepath.Abs(s.cfg.WebDir)
		where = "looked in " + abs
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		if _, err := fs.Stat(overlayFS(layers), name); errors.Is(err, fs.ErrNotExist) {
			switch {
			case bundleFiles[name]:
				http.Error(w, fmt.Sprintf("%s is missing: the browser bundle (cortiq.wasm, wasm_exec.js) is a build output. "+
					"Run `make wasm` in the cortiq repository, then start `cortiq serve` from the repository root or with --web REPO/web (%s).", name, where),
					http.StatusNotFound)
				return
			case name == "index.html":
				http.Error(w, fmt.Sprintf("no web page here: %s. Start `cortiq serve` from the repository root or pass --web REPO/web.", where), http.StatusNotFound)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}

// overlayFS opens a name from the first layer that has it.
type overlayFS []fs.FS

func (o overlayFS) Open(name string) (fs.File, error) {
	var first error
	for _, l := range o {
		f, err := l.Open(name)
		if err == nil {
			return f, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return nil, first
}

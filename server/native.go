package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// nativeWorker runs generations on one of the server's own models.
type nativeWorker struct {
	id, name, path string
	m              Model
	s              *Server
	slots          chan struct{} // bounds concurrent generations; nil = unbounded
	active         atomic.Int64
	closed         atomic.Bool
}

func (w *nativeWorker) info() WorkerInfo {
	return WorkerInfo{ID: w.id, Kind: "native", Name: w.name, Models: []string{w.name},
		Backend: w.m.BackendName(), Active: int(w.active.Load())}
}

func (w *nativeWorker) serves(model string) bool { return model == w.name }

func (w *nativeWorker) generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error) {
	w.active.Add(1)
	defer w.active.Add(-1)
	if w.slots != nil {
		select {
		case w.slots <- struct{}{}:
			defer func() { <-w.slots }()
		case <-ctx.Done():
			return &Result{FinishReason: "cancelled", Backend: w.m.BackendName()}, nil
		}
	}
	return w.m.Generate(ctx, req, onToken)
}

func (w *nativeWorker) load(ctx context.Context, model string, progress func(Progress)) (WorkerInfo, error) {
	return WorkerInfo{}, errors.New("a native worker holds one model: load without a worker id to add one")
}

func (w *nativeWorker) close() error {
	if w.closed.Swap(true) {
		return nil
	}
	return w.m.Close()
}

// loadNative loads a model with the configured Loader and adds it as a new
// native worker.
func (s *Server) loadNative(ctx context.Context, nameOrPath string, progress func(Progress)) (WorkerInfo, error) {
	if s.cfg.Loader == nil {
		return WorkerInfo{}, &apiError{Status: 403, Type: "invalid_request_error", Code: "load_disabled",
			Message: "this server does not load models on request"}
	}
	if nameOrPath == "" {
		return WorkerInfo{}, badRequest("model", "load: no model given")
	}
	m, name, p, err := s.cfg.Loader(ctx, nameOrPath, progress)
	if err != nil {
		return WorkerInfo{}, err
	}
	if s.draining.Load() {
		m.Close()
		return WorkerInfo{}, errShutdown
	}
	return s.AddModel(name, p, m), nil
}

// handleModelFile serves /models/<name>/<file> from a native model's
// directory (or its single file), with Range and ETag support, and
// /models/<name>/ as a JSON listing of the files.
func (s *Server) handleModelFile(w http.ResponseWriter, r *http.Request) {
	name, file := r.PathValue("name"), r.PathValue("file")
	var root string
	single := false
	s.mu.Lock()
	for _, wk := range s.workers {
		if nw, ok := wk.(*nativeWorker); ok && nw.name == name && nw.path != "" {
			root = nw.path
		}
	}
	s.mu.Unlock()
	if root == "" {
		http.NotFound(w, r)
		return
	}
	if st, err := os.Stat(root); err != nil {
		http.NotFound(w, r)
		return
	} else if !st.IsDir() {
		single = true
	}
	if file == "" {
		s.listModelFiles(w, root, single)
		return
	}
	if single {
		if file != filepath.Base(root) {
			http.NotFound(w, r)
			return
		}
		serveFile(w, r, filepath.Dir(root), file)
		return
	}
	serveFile(w, r, root, file)
}

// serveFile serves name under dir; os.Root keeps it inside dir whatever
// the name holds (.., symlinks).
func serveFile(w http.ResponseWriter, r *http.Request, dir, name string) {
	if !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.Size(), st.ModTime().UnixNano()))
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, path.Base(name), st.ModTime(), f)
}

func (s *Server) listModelFiles(w http.ResponseWriter, root string, single bool) {
	type entry struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	}
	var files []entry
	if single {
		if st, err := os.Stat(root); err == nil {
			files = append(files, entry{filepath.Base(root), st.Size()})
		}
	} else {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || len(files) >= 10000 {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil || strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
				files = append(files, entry{filepath.ToSlash(rel), info.Size()})
			}
			return nil
		})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Files []entry `json:"files"`
	}{files})
}

// itoa is strconv.Itoa, kept short for the metrics and SSE writers.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

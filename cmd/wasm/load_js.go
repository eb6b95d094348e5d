//go:build js

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall/js"
	"time"

	"github.com/hack-pad/hackpadfs"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/storage"
	"github.com/cortiq/cortiq/storage/download"
	"github.com/cortiq/cortiq/storage/opfs"
	"github.com/cortiq/cortiq/tensor"
)

// opfsRoot is the OPFS directory of the model cache (storage.Default) and
// osMount where worker.js exposes OPFS to Go's os package.
const (
	opfsRoot = "cortiq"
	osMount  = "/opfs/"
	modelDir = "models"
)

// state is the worker's loaded model: an engine (the same facade, backend
// choice, scheduler and generation loop as the native build) or a
// text-to-image pipeline.
type state struct {
	fsys storage.FS

	dev      *gpu.Device // the image pipeline's, opened once per worker
	devErr   error
	devTried bool

	eng  *engine.Engine // the loaded model, nil when none
	info *loadInfo
	img  *imageState // a loaded text-to-image pipeline (instead of eng)
}

func newState() *state { return &state{} }

// loadInfo is what load resolves to (and stats repeats).
type loadInfo struct {
	Source       string       `json:"source"`
	Key          string       `json:"key"`
	Path         string       `json:"path"`
	Family       string       `json:"family"`
	Layers       int          `json:"layers"`
	Hidden       int          `json:"hidden"`
	Vocab        int          `json:"vocab"`
	Context      int          `json:"context"`
	Files        []cachedFile `json:"files"`
	FromCache    bool         `json:"fromCache"`
	Downloaded   int64        `json:"downloadedBytes"`
	Resumed      int64        `json:"resumedBytes"`
	Backend      string       `json:"backend"` // what generate uses by default
	DeviceError  string       `json:"deviceError,omitempty"`
	Adapter      any          `json:"adapter,omitempty"`
	HasTokenizer bool         `json:"hasTokenizer"`
	Image        bool         `json:"image,omitempty"` // a text-to-image pipeline (use imagine)
	HasTemplate  bool         `json:"hasChatTemplate"`
	BOS          int          `json:"bos"`
	LoadSeconds  float64      `json:"loadSeconds"`
	// Where the time went: fetching into OPFS (0 from the cache), parsing
	// the model and its tokenizer, and building the backend (uploading the
	// weights to the GPU, or reading them for the CPU engine).
	FetchSeconds   float64    `json:"fetchSeconds"`
	ImportSeconds  float64    `json:"importSeconds"`
	BackendSeconds float64    `json:"backendSeconds"`
	Heap           heapReport `json:"heap"`
	Persisted      bool       `json:"persisted"`
}

func (s *state) opfs() (storage.FS, error) {
	if s.fsys != nil {
		return s.fsys, nil
	}
	if !opfs.Available() {
		return nil, errors.New("this browser exposes no Origin Private File System (navigator.storage.getDirectory): models cannot be cached")
	}
	f, err := storage.Default()
	if err != nil {
		return nil, fmt.Errorf("opening OPFS: %w", err)
	}
	s.fsys = f
	return f, nil
}

// device opens the WebGPU device for an image pipeline once; later loads
// reuse it (or its error).
func (s *state) device() (*gpu.Device, error) {
	if !s.devTried {
		s.devTried = true
		s.dev, s.devErr = gpu.Open(gpu.Options{})
	}
	return s.dev, s.devErr
}

func (s *state) unload() error {
	var errs []error
	if s.eng != nil {
		// The kept sessions, the backends and the model.
		errs = append(errs, s.eng.Close())
	}
	if s.img != nil {
		errs = append(errs, s.img.close())
	}
	s.eng, s.info, s.img = nil, nil, nil
	runtime.GC()
	return errors.Join(errs...)
}

func origin() string {
	return js.Global().Get("location").Get("origin").String()
}

// load fetches (or finds in OPFS) and imports a model, then prepares the
// backends.
func (s *state) load(ctx context.Context, r request) (*loadInfo, error) {
	t0 := time.Now()
	if err := s.unload(); err != nil {
		return nil, fmt.Errorf("unloading the previous model: %w", err)
	}
	src, err := parseSource(r.Source, origin())
	if err != nil {
		return nil, err
	}
	fsys, err := s.opfs()
	if err != nil {
		return nil, err
	}
	dir := modelDir + "/" + src.Key
	info := &loadInfo{Source: r.Source, Key: src.Key}

	man, ok := s.cachedManifest(fsys, dir)
	if r.Refresh || !ok {
		man, err = s.fetchModel(ctx, r, src, fsys, dir, info)
		if err != nil {
			return nil, err
		}
	} else {
		info.FromCache = true
	}
	info.Files = man.Files
	info.FetchSeconds = time.Since(t0).Seconds()
	t1 := time.Now()

	hs := newHeapSampler()
	p := osMount + opfsRoot + "/" + dir
	if man.Entry != "" {
		p += "/" + man.Entry
	}
	info.Path = p
	if diffusion.IsPipeline(p) {
		if err := s.loadPipeline(p, r, info); err != nil {
			return nil, fmt.Errorf("importing %s: %w", r.Source, err)
		}
		info.Persisted = r.Persisted
		s.info = info
		info.LoadSeconds = time.Since(t0).Seconds()
		return info, nil
	}
	// The engine imports the copy, loads its tokenizer, chooses the
	// backend (the policy every front end shares: the device when it
	// takes the model, else the CPU, which is built only when a session
	// needs it) and uploads the weights; hs paces the garbage collector
	// between tensors and times the two phases.
	var tWeights time.Time
	e, err := engine.Load(ctx, nil, p, engine.Options{
		Backend: r.Backend,
		// The page's generations keep their sessions (prefix reuse): the
		// next turn of a chat prefills only its new tokens, as the CLI
		// chat and the server do.
		PrefixCacheBytes: pagePrefixCache,
		// The browser's adapter is the one the page has: no timing
		// against the CPU, software (SwiftShader) or not.
		NoProbe: true, AllowSoftware: true, CPUOnDemand: true,
		WrapWeights: func(w model.Weights) model.Weights {
			tWeights = time.Now()
			info.ImportSeconds = tWeights.Sub(t1).Seconds()
			hs.markWeights()
			return &sampledWeights{Weights: w, hs: hs}
		},
	})
	hs.sample()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Source, err)
	}
	info.BackendSeconds = time.Since(tWeights).Seconds()
	info.Heap = hs.report()

	a := &e.Model.Arch
	info.Family, info.Layers, info.Hidden, info.Vocab, info.Context = a.Family, len(a.Layers), a.Hidden, a.Vocab, a.Context
	info.HasTokenizer = e.Tokenizer != nil
	if e.Tokenizer != nil {
		_, info.HasTemplate = e.Tokenizer.ChatTemplate("")
	}
	info.BOS = a.BOS
	info.Persisted = r.Persisted
	s.eng = e
	s.info = info
	s.fillBackend()
	info.LoadSeconds = time.Since(t0).Seconds()
	return info, nil
}

// fillBackend records the default backend and why the GPU is not used.
func (s *state) fillBackend() {
	info := s.info
	info.Backend = s.eng.BackendName()
	info.DeviceError = ""
	info.Adapter = nil
	if s.eng.Device() != nil {
		if ai, err, ok := adapter(); ok && err == nil {
			info.Adapter = ai
		}
	}
	if err := s.eng.DeviceError(); err != nil {
		info.DeviceError = err.Error()
	}
}

// cachedManifest returns the manifest of a complete copy in OPFS.
func (s *state) cachedManifest(fsys storage.FS, dir string) (*manifest, bool) {
	b, err := hackpadfs.ReadFile(fsys, dir+"/"+manifestName)
	if err != nil {
		return nil, false
	}
	man, err := parseManifest(b)
	if err != nil {
		return nil, false
	}
	for _, f := range man.Files {
		fi, err := hackpadfs.Stat(fsys, dir+"/"+f.Name)
		if err != nil || fi.Size() != f.Size {
			return nil, false
		}
	}
	return man, true
}

// fetchModel plans the files of src, checks the quota, downloads each into
// OPFS and writes the manifest last, so only a complete model is trusted.
func (s *state) fetchModel(ctx context.Context, r request, src source, fsys storage.FS, dir string, info *loadInfo) (*manifest, error) {
	// Whatever manifest there was no longer describes what will be there.
	hackpadfs.Remove(fsys, dir+"/"+manifestName)
	client := http.DefaultClient
	header := http.Header{}
	if r.Token != "" && sameOrigin(src.Base, origin()) {
		header.Set("Authorization", "Bearer "+r.Token)
	}
	var files []remoteFile
	entry := ""
	switch src.Kind {
	case sourceName:
		b, err := httpGetSmall(ctx, client, src.Base, header, 4<<20)
		if err != nil {
			return nil, fmt.Errorf("model %q: listing %s: %w", src.Spec, src.Base, err)
		}
		var l listing
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("model %q: listing %s: %w", src.Spec, src.Base, err)
		}
		files, entry, err = pickFiles(l.Files)
		if err != nil {
			return nil, fmt.Errorf("model %q: %s: %w", src.Spec, src.Base, err)
		}
	case sourceFile:
		files = []remoteFile{{Name: src.File, Size: r.Size, SHA256: r.SHA256}}
		entry = src.File
	case sourceDir:
		// No listing: config.json must be there, the index decides the
		// shards, the tokenizer files are optional.
		files = []remoteFile{{Name: "config.json"}, {Name: "model.safetensors.index.json", Optional: true}}
		for _, n := range hfFiles {
			if n != "config.json" && n != "model.safetensors.index.json" {
				files = append(files, remoteFile{Name: n, Optional: true})
			}
		}
	}

	free := opfs.Free
	if r.AvailableBytes > 0 {
		free = func() (int64, error) { return r.AvailableBytes, nil }
	}
	var known int64
	for _, f := range files {
		known += f.Size
	}
	if known > 0 {
		if err := download.CheckSpace(free)(known); err != nil {
			return nil, fmt.Errorf("model %q: %w", src.Spec, err)
		}
	}

	man := &manifest{Version: manifestVersion, Source: src.Spec, Base: src.Base, Entry: entry}
	retries := 3
	if r.Retries != nil {
		retries = *r.Retries
	}
	checkpoint := r.Checkpoint
	if checkpoint <= 0 {
		checkpoint = 1 << 20
	}
	var overallDone int64
	fetchOne := func(f remoteFile, idx, n int) (bool, error) {
		u := src.Base + escapePath(f.Name)
		dst := dir + "/" + f.Name
		last := time.Time{}
		res, err := download.Fetch(ctx, fsys, u, dst, download.Options{
			SHA256:           f.SHA256,
			Size:             f.Size,
			Check:            resolve.Check(f.Name), // the browser sees no X-Linked-Etag
			Header:           header,
			Retries:          retries,
			RetryDelay:       500 * time.Millisecond,
			CheckpointBytes:  checkpoint,
			ProgressInterval: 100 * time.Millisecond,
			Quota:            download.CheckSpace(free),
			Progress: func(p download.Progress) {
				if time.Since(last) < 90*time.Millisecond && p.Done != p.Total {
					return
				}
				last = time.Now()
				reply(r.ID, "progress", map[string]any{
					"phase": "download", "file": f.Name, "fileIndex": idx, "files": n,
					"done": float64(p.Done), "total": float64(p.Total), "rate": p.Rate,
					"resumed": float64(p.Resumed), "overallDone": float64(overallDone + p.Done), "overallTotal": float64(known),
				})
			},
		})
		if err != nil {
			if f.Optional && strings.Contains(err.Error(), "HTTP 404") {
				return false, nil
			}
			return false, err
		}
		if !res.Cached {
			info.Downloaded += res.Size - res.Resumed
		}
		info.Resumed += res.Resumed
		overallDone += res.Size
		man.Files = append(man.Files, cachedFile{Name: f.Name, Size: res.Size, SHA256: res.SHA256, Verified: res.Verified.String()})
		return true, nil
	}
	for i := 0; i < len(files); i++ {
		f := files[i]
		got, err := fetchOne(f, i, len(files))
		if err != nil {
			return nil, fmt.Errorf("model %q: %w", src.Spec, err)
		}
		if src.Kind != sourceDir || f.Name != "model.safetensors.index.json" || i != 1 {
			continue
		}
		// The directory's weights: the shards of the index, or the single file.
		shards := []string{"model.safetensors"}
		if got {
			b, err := hackpadfs.ReadFile(fsys, dir+"/"+f.Name)
			if err != nil {
				return nil, err
			}
			if shards, err = hfShards(b); err != nil {
				return nil, fmt.Errorf("model %q: %w", src.Spec, err)
			}
		}
		var more []remoteFile
		for _, sh := range shards {
			more = append(more, remoteFile{Name: sh})
		}
		files = append(files[:i+1], append(more, files[i+1:]...)...)
	}
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := hackpadfs.WriteFullFile(fsys, dir+"/"+manifestName, b, 0o644); err != nil {
		return nil, fmt.Errorf("model %q: writing %s: %w", src.Spec, manifestName, err)
	}
	return man, nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// httpGetSmall fetches a small document (a listing), refusing more than max
// bytes.
func httpGetSmall(ctx context.Context, c *http.Client, u string, h http.Header, max int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("listing larger than %d bytes", max)
	}
	return b, nil
}

// cached lists the models in OPFS with their manifests.
func (s *state) cached() (any, error) {
	fsys, err := s.opfs()
	if err != nil {
		return nil, err
	}
	ents, err := hackpadfs.ReadDir(fsys, modelDir)
	if err != nil {
		return []any{}, nil
	}
	type entry struct {
		Key      string       `json:"key"`
		Source   string       `json:"source,omitempty"`
		Complete bool         `json:"complete"`
		Files    []cachedFile `json:"files,omitempty"`
		Partial  []string     `json:"partial,omitempty"` // every file present, incl. .part
	}
	out := []entry{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := modelDir + "/" + e.Name()
		en := entry{Key: e.Name()}
		if man, ok := s.cachedManifest(fsys, dir); ok {
			en.Complete, en.Source, en.Files = true, man.Source, man.Files
		}
		if sub, err := hackpadfs.ReadDir(fsys, dir); err == nil {
			for _, f := range sub {
				en.Partial = append(en.Partial, f.Name())
			}
		}
		out = append(out, en)
	}
	return out, nil
}

// remove deletes a cached model (by load() argument or cache key).
func (s *state) remove(spec string) error {
	fsys, err := s.opfs()
	if err != nil {
		return err
	}
	key := spec
	if src, err := parseSource(spec, origin()); err == nil {
		key = src.Key
	}
	if !validRel(key) || strings.Contains(key, "/") {
		return fmt.Errorf("remove: bad model %q", spec)
	}
	if s.info != nil && s.info.Key == key {
		if err := s.unload(); err != nil {
			return err
		}
	}
	return hackpadfs.RemoveAll(fsys, modelDir+"/"+key)
}

// errorKind classifies an error for the UI.
func errorKind(err error) string {
	var qe *download.QuotaError
	switch {
	case errors.As(err, &qe), errors.Is(err, download.ErrQuota), errors.Is(err, opfs.ErrQuota):
		return "quota"
	case errors.Is(err, download.ErrChecksum):
		return "checksum"
	case errors.Is(err, download.ErrLength):
		return "length"
	case errors.Is(err, download.ErrInvalid):
		return "invalid"
	case errors.Is(err, download.ErrStalled):
		return "stalled"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "error"
}

// sampledWeights samples the heap each time a tensor is read, which during
// a load is where the heap peaks.
type sampledWeights struct {
	model.Weights
	hs *heapSampler
}

func (w *sampledWeights) Tensor(name string) (*tensor.Tensor, bool) {
	// The previous tensor is garbage by now (the backend has uploaded it):
	// collect it before reading the next, so the heap holds about one
	// tensor's working set instead of GOGC's multiple of it.
	if w.hs.sample() > w.hs.live+16<<20 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.hs.live = ms.HeapAlloc
	}
	t, ok := w.Weights.Tensor(name)
	w.hs.sample()
	return t, ok
}

func (w *sampledWeights) Err() error {
	if e, ok := w.Weights.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

// heapSampler tracks the wasm heap during a load.
type heapSampler struct {
	base, peakAlloc, peakSys uint64
	live                     uint64 // HeapAlloc after the last forced GC
	beforeWeights            uint64
	memBase                  float64
	t                        time.Time
	n                        int
}

type heapReport struct {
	BaselineHeap  uint64  `json:"baselineHeapBytes"`
	PeakHeap      uint64  `json:"peakHeapBytes"`      // max HeapAlloc seen
	PeakAbove     uint64  `json:"peakAboveBaseline"`  // PeakHeap - BaselineHeap
	PeakSys       uint64  `json:"peakSysBytes"`       // runtime's memory from the wasm host
	WasmMemory    float64 `json:"wasmMemoryBytes"`    // WebAssembly.Memory size after the load
	WasmMemBefore float64 `json:"wasmMemoryBefore"`   // and before it
	FinalHeap     uint64  `json:"finalHeapBytes"`     // HeapAlloc after a GC at the end
	BeforeWeights uint64  `json:"beforeWeightsBytes"` // HeapAlloc with metadata and tokenizer in, no weight read yet
	Samples       int     `json:"samples"`
}

func wasmMemory() float64 {
	w := js.Global().Get("wasm")
	if !w.Truthy() {
		return 0
	}
	return w.Get("instance").Get("exports").Get("mem").Get("buffer").Get("byteLength").Float()
}

func newHeapSampler() *heapSampler {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &heapSampler{base: ms.HeapAlloc, live: ms.HeapAlloc, peakAlloc: ms.HeapAlloc, peakSys: ms.Sys, memBase: wasmMemory()}
}

// markWeights notes the heap once the model's metadata and tokenizer are
// in, before any weight is read.
func (h *heapSampler) markWeights() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.beforeWeights, h.live = ms.HeapAlloc, ms.HeapAlloc
	h.sample()
}

// sample records the heap and returns HeapAlloc.
func (h *heapSampler) sample() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.n++
	h.peakAlloc = max(h.peakAlloc, ms.HeapAlloc)
	h.peakSys = max(h.peakSys, ms.Sys)
	return ms.HeapAlloc
}

func (h *heapSampler) report() heapReport {
	h.sample()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapReport{
		BaselineHeap: h.base, PeakHeap: h.peakAlloc, PeakAbove: h.peakAlloc - h.base,
		PeakSys: h.peakSys, WasmMemory: wasmMemory(), WasmMemBefore: h.memBase,
		FinalHeap: ms.HeapAlloc, BeforeWeights: h.beforeWeights, Samples: h.n,
	}
}

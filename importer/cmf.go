package importer

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// FromCMF opens a CMF file as a model. Weights alias the memory-mapped file
// (natively; elsewhere they are read into memory); Model.Close releases it.
// Every tensor's data is checked against its CRC-32C when it is first used
// (not here, which would read every byte before any is needed): a damaged
// tensor's Weights.Tensor call returns false, and its *cmf.ChecksumError,
// naming the file and the tensor, is what the Weights' Err method returns.
// Model.Source is the provenance the file records (the original sources of
// the import).
func FromCMF(path string) (*model.Model, error) {
	f, err := cmf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := cmfModel(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// FromCMFFile imports an opened CMF file (for instance one read with
// cmf.Read through HTTP range requests in the browser); Model.Close closes
// it (close the model, not the file: on a mapped file a background pass
// checks the tensors until Model.Close stops it). On a memory-mapped file
// the weights alias the mapping; otherwise each Weights.Tensor call reads
// that tensor (nothing is cached). Tensors are
// checked as FromCMF says; a read error or checksum mismatch makes Tensor
// return false, with the error available from the Weights' Err method
// (interface{ Err() error }); ReadTensorRows checks a tensor's checksum
// when its last row is read in order (out of order, it reads the whole
// tensor once to check it).
func FromCMFFile(f *cmf.File) (*model.Model, error) {
	return cmfModel(f)
}

func cmfModel(f *cmf.File) (*model.Model, error) {
	if _, ok := f.Meta.Extra["diffusers"]; ok {
		return nil, fmt.Errorf("cmf: %s holds a text-to-image pipeline, not a language model: run it with cortiq imagine", f.Name)
	}
	a := f.Meta.Arch
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("cmf: %s: %w", f.Name, err)
	}
	if _, ok := f.Entry(model.TokenEmbd); !ok {
		return nil, fmt.Errorf("cmf: %s: no %s", f.Name, model.TokenEmbd)
	}
	checks := make(map[string]*cmfCheck, len(f.Tensors))
	for _, name := range f.Names() {
		checks[name] = &cmfCheck{}
	}
	prov := f.Meta.Provenance
	if prov.Format == "" {
		prov = model.Provenance{Format: "cmf", Files: []model.SourceFile{{Name: filepath.Base(f.Name), Size: f.Size}}}
	}
	// Only unmapped weights offer row ranges (model.RangeReader): mapped
	// tensors are uploaded whole, straight from the mapping.
	if !f.Mapped() {
		lw := &lazyWeights{label: "cmf: " + f.Name, src: f, headers: make(model.MapWeights, len(f.Tensors)),
			views: make(map[string]lazyView, len(f.Tensors)), check: &cmfChecks{f: f, checks: checks}}
		for i := range f.Tensors {
			e := &f.Tensors[i]
			lw.headers[e.Name] = &tensor.Tensor{Name: e.Name, Codec: e.Codec, Shape: slices.Clone(e.Shape)}
			lw.views[e.Name] = lazyView{src: e.Name, n: e.Length}
		}
		return &model.Model{Arch: a, Weights: lw, Tokenizer: f.Meta.Tokenizer, Source: prov, Close: f.Close}, nil
	}
	w := &cmfWeights{f: f, checks: checks, mapped: make(model.MapWeights, len(f.Tensors))}
	for _, name := range f.Names() {
		t, err := f.Tensor(name)
		if err != nil {
			return nil, err
		}
		w.mapped[name] = t
	}
	w.verifyAhead(max(1, runtime.GOMAXPROCS(0)-1))
	weights := model.Weights(w)
	closeFile := func() error {
		w.stopVerify() // the pass reads the mapping Close releases
		return f.Close()
	}
	return &model.Model{Arch: a, Weights: weights, Tokenizer: f.Meta.Tokenizer, Source: prov, Close: closeFile}, nil
}

// cmfWeights are a mapped CMF file's tensors, each checked against its
// CRC-32C once, on first use or by the background pass (the bytes do not
// change). An unmapped file's are lazyWeights checked by cmfChecks on every
// read (each read may see different bytes).
type cmfWeights struct {
	f      *cmf.File
	mapped model.MapWeights // the tensors aliasing the mapping
	checks map[string]*cmfCheck
	mu     sync.Mutex
	err    error

	// The background pass over a mapping (verifyAhead).
	bg   sync.WaitGroup
	next atomic.Int64 // index of the next tensor to check
	stop atomic.Bool
}

// verifyAhead checks a mapping's tensors on workers goroutines, in
// directory order (the order SaveCMF writes and backends load), so that a backend taking every tensor in turn (as cpu.New does)
// finds most already checked: the checksums of a large file cost about
// 1/workers of one pass. A tensor being checked when it is asked for is
// waited for, never checked twice. stopVerify must be called before the
// mapping goes away.
func (w *cmfWeights) verifyAhead(workers int) {
	names := w.f.Names()
	for range workers {
		w.bg.Add(1)
		go func() {
			defer w.bg.Done()
			for !w.stop.Load() {
				i := w.next.Add(1) - 1
				if i >= int64(len(names)) {
					return
				}
				name := names[i]
				c := w.checks[name]
				t := w.mapped[name]
				c.once.Do(func() { c.err = w.f.CheckData(name, t.Data, t.Side) })
			}
		}()
	}
}

// stopVerify ends the background pass and waits for it.
func (w *cmfWeights) stopVerify() {
	w.stop.Store(true)
	w.bg.Wait()
}

// cmfCheck is the checking state of one tensor.
type cmfCheck struct {
	once sync.Once
	err  error // of the checksum, once done
	// For ReadTensorRows: the checksum of the tensor's first next bytes,
	// read in order, and whether the whole tensor was checked.
	mu      sync.Mutex
	next    int64
	crc     uint32
	checked bool
}

func (w *cmfWeights) Names() []string { return w.f.Names() }

func (w *cmfWeights) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

func (w *cmfWeights) Tensor(name string) (*tensor.Tensor, bool) {
	c, ok := w.checks[name]
	if !ok {
		return nil, false
	}
	if !w.f.Mapped() {
		w.fail(fmt.Errorf("cmf: %s: file is closed", w.f.Name))
		return nil, false
	}
	t := w.mapped[name]
	c.once.Do(func() { c.err = w.f.CheckData(name, t.Data, t.Side) })
	if c.err != nil {
		w.fail(c.err)
		return nil, false
	}
	return t, true
}

// cmfChecks verifies what lazyWeights read from an unmapped CMF file: a
// whole tensor against its checksum; rows by extending a running CRC-32C
// while they come in order from the first, compared when the last row is
// read (a read that skips ahead reads the whole tensor once to check it).
type cmfChecks struct {
	f      *cmf.File
	checks map[string]*cmfCheck
}

func (c *cmfChecks) whole(name string, data []byte) error { return c.f.CheckData(name, data) }

func (c *cmfChecks) rows(name string, off int64, data []byte) error {
	e, _ := c.f.Entry(name)
	k := c.checks[name]
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.checked {
		return k.err
	}
	switch end := off + int64(len(data)); {
	case off == k.next:
		k.crc = cmf.UpdateChecksum(k.crc, data)
		k.next = end
	case end <= k.next:
		// Rows already folded into the running checksum.
	default:
		k.checked, k.err = true, c.f.VerifyTensor(name)
	}
	if rows, err := tensor.ByteLen(e.Codec, e.Shape); !k.checked && err == nil && k.next == rows && rows < e.Length {
		// Every row read in order: the side field that follows them (a
		// codec with one) completes the checksum.
		side := make([]byte, e.Length-rows)
		if err := c.f.ReadRange(name, rows, side); err != nil {
			k.checked, k.err = true, err
			return k.err
		}
		k.crc = cmf.UpdateChecksum(k.crc, side)
		k.next = e.Length
	}
	if !k.checked && k.next == e.Length {
		k.checked, k.err = true, c.f.CheckSum(name, k.crc)
	}
	return k.err
}

// verifyAll checks every tensor, as their first use would.
// verifyAll checks every tensor, as their first use would, until ctx is
// done (then it returns ctx's error).
func (w *cmfWeights) verifyAll(ctx context.Context) error {
	for _, name := range w.f.Names() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, ok := w.Tensor(name); !ok {
			return w.Err()
		}
	}
	return nil
}

// Err returns the first error a Tensor or ReadTensorRows call met.
func (w *cmfWeights) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

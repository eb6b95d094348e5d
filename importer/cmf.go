package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// SaveOptions chooses SaveCMF's weight encoding.
type SaveOptions struct {
	// Keep writes every tensor in its current encoding; Quant is ignored.
	Keep bool
	// Quant is the encoding weights are converted to when Keep is false
	// (any float codec: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K):
	//   - to a plain float codec (f32, f16, bf16): every float tensor;
	//   - to a block codec: every float tensor of two or more dimensions
	//     whose rows are a whole number of blocks, embeddings and output
	//     included; 1-D tensors (norms, biases) and matrices with other row
	//     lengths keep their encoding.
	// Integer tensors never change.
	Quant tensor.Codec
	// Encode, when set, is asked first for each tensor the rules above
	// convert: ok true means out is its encoding (GPTQ's, from package
	// quant); ok false leaves it to round-to-nearest.
	Encode func(t *tensor.Tensor) (out *tensor.Tensor, ok bool, err error)
}

// SaveCMF writes m as a CMF file at path (through a temporary file renamed
// into place, so a failed save leaves no partial file), re-encoding weights
// as opts says. Re-encoding goes through float32 (tensor.Dequantize then
// tensor.Quantize) in chunks of rows, in parallel, so memory stays bounded by
// the largest tensor's encoded size. Tensors are written in a deterministic
// order, so the same model and options give the same bytes.
//
// The metadata records m.Arch, m.Tokenizer and m.Source as provenance,
// with the SHA-256 of every source file the importer left undigested.
func SaveCMF(m *model.Model, path string, opts SaveOptions) error {
	target := opts.Quant
	requant := !opts.Keep
	if requant && (!target.Valid() || target == tensor.I32) {
		return fmt.Errorf("cmf: %s: cannot convert weights to %s", path, target)
	}
	if err := m.Arch.Validate(); err != nil {
		return fmt.Errorf("cmf: %s: %w", path, err)
	}
	prov, err := digestProvenance(m.Source)
	if err != nil {
		return fmt.Errorf("cmf: %s: provenance: %w", path, err)
	}
	meta := &cmf.Metadata{Arch: m.Arch, Tokenizer: m.Tokenizer, Provenance: prov, CreatedBy: "cortiq"}
	if requant {
		meta.Extra = map[string]json.RawMessage{"quantization": json.RawMessage(strconv.Quote(target.String()))}
	}
	tmp := path + ".tmp"
	w, err := cmf.Create(tmp, meta)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		w.Close()
		os.Remove(tmp)
		return err
	}
	for _, name := range cmfTensorOrder(m.Weights.Names()) {
		t, ok := m.Weights.Tensor(name)
		if !ok {
			if err := model.WeightsErr(m.Weights); err != nil {
				return fail(fmt.Errorf("cmf: %s: tensor %q: %w", path, name, err))
			}
			return fail(fmt.Errorf("cmf: %s: tensor %q listed but absent", path, name))
		}
		if requant && cmfShouldConvert(t, target) {
			var e *tensor.Tensor
			done := false
			if opts.Encode != nil {
				e, done, err = opts.Encode(t)
			}
			if err == nil && !done {
				e, err = cmfConvert(t, target)
			}
			if err != nil {
				return fail(fmt.Errorf("cmf: %s: tensor %q: %w", path, name, err))
			}
			t = e
		}
		if err := w.WriteTensor(t); err != nil {
			return fail(err)
		}
	}
	if err := w.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cmf: %w", err)
	}
	return nil
}

// cmfShouldConvert applies SaveCMF's re-encoding rules.
func cmfShouldConvert(t *tensor.Tensor, target tensor.Codec) bool {
	if t.Codec == target || t.Codec == tensor.I32 || !t.Codec.Valid() {
		return false
	}
	if !target.Quantized() {
		return true
	}
	return len(t.Shape) >= 2 && t.Cols()%target.BlockLen() == 0 && t.Cols() > 0
}

// cmfConvert re-encodes t to target, in parallel over chunks of rows.
func cmfConvert(t *tensor.Tensor, target tensor.Codec) (*tensor.Tensor, error) {
	cols := t.Cols()
	rows := t.Rows()
	if cols == 0 || rows == 0 {
		out := *t
		out.Codec = target
		out.Data = nil
		return &out, nil
	}
	srcRow, err := t.Codec.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	dstRow, err := target.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if len(t.Data) != rows*srcRow {
		return nil, fmt.Errorf("%d bytes of data, %s %v needs %d", len(t.Data), t.Codec, t.Shape, rows*srcRow)
	}
	dst := make([]byte, rows*dstRow)
	// Chunks of about 1M elements bound the float32 scratch per worker.
	chunk := max(1, (1<<20)/cols)
	workers := max(1, min(runtime.GOMAXPROCS(0), (rows+chunk-1)/chunk))
	next := make(chan int, workers)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, chunk*cols)
			for r0 := range next {
				n := min(chunk, rows-r0)
				f := buf[:n*cols]
				err := tensor.Dequantize(f, t.Codec, t.Data[r0*srcRow:(r0+n)*srcRow])
				if err == nil {
					err = tensor.Quantize(dst[r0*dstRow:(r0+n)*dstRow], target, f)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	for r0 := 0; r0 < rows; r0 += chunk {
		next <- r0
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return &tensor.Tensor{Name: t.Name, Codec: target, Shape: slices.Clone(t.Shape), Data: dst}, nil
}

// cmfTensorOrder sorts names into a deterministic file order: the
// embedding, then each layer's tensors (layers numerically, names
// alphabetically), then everything else alphabetically. Tensors used
// together stay close in the file.
func cmfTensorOrder(names []string) []string {
	out := slices.Clone(names)
	key := func(n string) (int, int, string) {
		if n == model.TokenEmbd {
			return 0, 0, n
		}
		if rest, ok := strings.CutPrefix(n, "blk."); ok {
			if i := strings.IndexByte(rest, '.'); i > 0 {
				if l, err := strconv.Atoi(rest[:i]); err == nil {
					return 1, l, rest[i+1:]
				}
			}
		}
		return 2, 0, n
	}
	slices.SortFunc(out, func(a, b string) int {
		ga, la, na := key(a)
		gb, lb, nb := key(b)
		if ga != gb {
			return ga - gb
		}
		if la != lb {
			return la - lb
		}
		return strings.Compare(na, nb)
	})
	return out
}

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
	w := &cmfWeights{f: f, checks: make(map[string]*cmfCheck, len(f.Tensors))}
	for _, name := range f.Names() {
		w.checks[name] = &cmfCheck{}
	}
	// Only unmapped weights offer row ranges (model.RangeReader): mapped
	// tensors are uploaded whole, straight from the mapping.
	var weights model.Weights = &cmfLazyWeights{w}
	if f.Mapped() {
		w.mapped = make(model.MapWeights, len(f.Tensors))
		for _, name := range f.Names() {
			t, err := f.Tensor(name)
			if err != nil {
				return nil, err
			}
			w.mapped[name] = t
		}
		weights = w
		w.verifyAhead(max(1, runtime.GOMAXPROCS(0)-1))
	}
	prov := f.Meta.Provenance
	if prov.Format == "" {
		prov = model.Provenance{Format: "cmf", Files: []model.SourceFile{{Name: filepath.Base(f.Name), Size: f.Size}}}
	}
	closeFile := func() error {
		w.stopVerify() // the pass reads the mapping Close releases
		return f.Close()
	}
	return &model.Model{Arch: a, Weights: weights, Tokenizer: f.Meta.Tokenizer, Source: prov, Close: closeFile}, nil
}

// cmfLazyWeights are the weights of an unmapped file: cmfWeights that can
// also be read in row ranges (ranged.go).
type cmfLazyWeights struct{ *cmfWeights }

// cmfWeights are a CMF file's tensors, each checked against its CRC-32C on
// first use: once for a mapping (the bytes do not change), on every read
// otherwise (each read may see different bytes).
type cmfWeights struct {
	f      *cmf.File
	mapped model.MapWeights // the tensors aliasing the mapping, or nil: read on demand
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
				c.once.Do(func() { c.err = w.f.CheckData(name, w.mapped[name].Data) })
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
	if w.mapped != nil {
		if !w.f.Mapped() {
			w.fail(fmt.Errorf("cmf: %s: file is closed", w.f.Name))
			return nil, false
		}
		t := w.mapped[name]
		c.once.Do(func() { c.err = w.f.CheckData(name, t.Data) })
		if c.err != nil {
			w.fail(c.err)
			return nil, false
		}
		return t, true
	}
	t, err := w.f.Tensor(name)
	if err == nil {
		err = w.f.CheckData(name, t.Data)
	}
	if err != nil {
		w.fail(err)
		return nil, false
	}
	return t, true
}

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

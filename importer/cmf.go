package importer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

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
			return fail(fmt.Errorf("cmf: %s: tensor %q listed but absent", path, name))
		}
		if requant && cmfShouldConvert(t, target) {
			if t, err = cmfConvert(t, target); err != nil {
				return fail(fmt.Errorf("cmf: %s: tensor %q: %w", path, name, err))
			}
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
// Tensor checksums are not verified here, since that reads every byte: use
// cmf.Open and File.Verify for that. Model.Source is the provenance the file
// records (the original sources of the import).
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
// it. On a memory-mapped file the weights alias the mapping; otherwise each
// Weights.Tensor call reads that tensor (nothing is cached), and a read error
// makes it return false, with the error available from the Weights' Err
// method (interface{ Err() error }).
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
	var weights model.Weights
	if f.Mapped() {
		w := make(model.MapWeights, len(f.Tensors))
		for _, name := range f.Names() {
			t, err := f.Tensor(name)
			if err != nil {
				return nil, err
			}
			w[name] = t
		}
		weights = w
	} else {
		weights = &cmfLazyWeights{f: f}
	}
	prov := f.Meta.Provenance
	if prov.Format == "" {
		prov = model.Provenance{Format: "cmf", Files: []model.SourceFile{{Name: filepath.Base(f.Name), Size: f.Size}}}
	}
	return &model.Model{Arch: a, Weights: weights, Tokenizer: f.Meta.Tokenizer, Source: prov, Close: f.Close}, nil
}

// cmfLazyWeights reads tensors from an unmapped file on demand.
type cmfLazyWeights struct {
	f   *cmf.File
	mu  sync.Mutex
	err error
}

func (w *cmfLazyWeights) Names() []string { return w.f.Names() }

func (w *cmfLazyWeights) Tensor(name string) (*tensor.Tensor, bool) {
	if _, ok := w.f.Entry(name); !ok {
		return nil, false
	}
	t, err := w.f.Tensor(name)
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
		return nil, false
	}
	return t, true
}

// Err returns the first error a Tensor call met.
func (w *cmfLazyWeights) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

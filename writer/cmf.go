// Package writer writes models as files: CMF (SaveCMF, the engine's own
// format, which the importer's cache of Hugging Face conversions uses) and
// GGUF for llama.cpp (SaveGGUF). It is the other direction of package
// importer, which only reads; both share the family records
// (model/family) and, for GGUF, the llama.cpp conventions
// (internal/ggufarch), and the writer never imports the importer, so that
// the importer's cache can use it.
//
// Writers re-encode weights as SaveOptions says, write through a temporary
// file renamed into place (a failed save leaves no partial file), and give
// the same bytes for the same model and options.
//
// The containers' own encoders (gguf.Writer, cmf.Writer, safetensors.Write)
// stay beside their decoders in the format packages, as archive/zip keeps
// its Reader and Writer together: a format is one package. What moved here
// is turning a model into a file: choosing tensors, names, conventions and
// encodings, which is the importer's inverse.
package writer

import (
	"encoding/json"
	"fmt"
	"os"
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
	//     lengths keep their encoding;
	//   - to blr: the 2-D matrices it shrinks (tensor.BLRFits) except the
	//     token embedding and the output head.
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
	for _, name := range tensorOrder(m.Weights.Names()) {
		t, ok := m.Weights.Tensor(name)
		if !ok {
			if err := model.WeightsErr(m.Weights); err != nil {
				return fail(fmt.Errorf("cmf: %s: tensor %q: %w", path, name, err))
			}
			return fail(fmt.Errorf("cmf: %s: tensor %q listed but absent", path, name))
		}
		if requant && shouldConvert(t, target) {
			if t, err = saveEncode(t, target, opts); err != nil {
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

// saveEncode re-encodes t to target: opts.Encode's encoding when it gives
// one, else round to nearest.
func saveEncode(t *tensor.Tensor, target tensor.Codec, opts SaveOptions) (*tensor.Tensor, error) {
	if opts.Encode != nil {
		e, done, err := opts.Encode(t)
		if err != nil || done {
			return e, err
		}
	}
	return convert(t, target)
}

// shouldConvert applies SaveCMF's re-encoding rules.
func shouldConvert(t *tensor.Tensor, target tensor.Codec) bool {
	if t.Codec == target || t.Codec == tensor.I32 || !t.Codec.Valid() {
		return false
	}
	if target == tensor.BLR {
		// The layers' projections: a lookup (the embedding) and the head
		// keep their encoding, and so does a matrix blr would not shrink.
		return t.Name != model.TokenEmbd && t.Name != model.Output && tensor.BLRFits(t.Shape)
	}
	if !target.Quantized() {
		return true
	}
	return len(t.Shape) >= 2 && t.Cols()%target.BlockLen() == 0 && t.Cols() > 0
}

// convert re-encodes t to target, in parallel over chunks of rows.
func convert(t *tensor.Tensor, target tensor.Codec) (*tensor.Tensor, error) {
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
	if target.HasSide() {
		// A side field (q8_2f's column scales, blr's factors) is chosen
		// over whole matrices: the tensor is decoded and encoded whole.
		f := make([]float32, rows*cols)
		if err := tensor.DequantizeTensor(f, t); err != nil {
			return nil, err
		}
		data, side, err := tensor.EncodeTensor(target, t.Shape, f)
		if err != nil {
			return nil, err
		}
		return &tensor.Tensor{Name: t.Name, Codec: target, Shape: slices.Clone(t.Shape), Data: data, Side: side}, nil
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
				err := tensor.DecodeRows(f, t, r0, n)
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

// tensorOrder sorts names into a deterministic file order: the
// embedding, then each layer's tensors (layers numerically, names
// alphabetically), then everything else alphabetically. Tensors used
// together stay close in the file.
func tensorOrder(names []string) []string {
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

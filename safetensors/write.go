package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/cortiq/cortiq/tensor"
)

// Write writes tensors (F32, F16, BF16 or I32) as a safetensors file with
// the metadata {"format": "pt"}, so that Python loaders accept it. Tensors
// are stored in name order; names must be unique.
func Write(w io.Writer, tensors []*tensor.Tensor) error {
	return WriteMetadata(w, tensors, map[string]string{"format": "pt"})
}

// WriteMetadata is Write with an explicit __metadata__ map (nil for none).
func WriteMetadata(w io.Writer, tensors []*tensor.Tensor, metadata map[string]string) error {
	ts := append([]*tensor.Tensor(nil), tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	header := make(map[string]any, len(ts)+1)
	if metadata != nil {
		header["__metadata__"] = metadata
	}
	var off int64
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return fmt.Errorf("safetensors: write: duplicate tensor %q", t.Name)
		}
		if t.Name == "__metadata__" || t.Name == "" {
			return fmt.Errorf("safetensors: write: invalid tensor name %q", t.Name)
		}
		dt, ok := DTypeOf(t.Codec)
		if !ok {
			return fmt.Errorf("safetensors: write: tensor %q: codec %s has no safetensors dtype", t.Name, t.Codec)
		}
		n, err := tensor.ByteLen(t.Codec, t.Shape)
		if err != nil {
			return fmt.Errorf("safetensors: write: tensor %q: %w", t.Name, err)
		}
		if n != int64(len(t.Data)) {
			return fmt.Errorf("safetensors: write: tensor %q: %d bytes of data for %s%v, want %d", t.Name, len(t.Data), t.Codec, t.Shape, n)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": dt, "shape": shape, "data_offsets": [2]int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	// Pad with spaces so the data area starts 8-byte aligned.
	for (8+len(hb))%8 != 0 {
		hb = append(hb, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(hb)))
	bw.Write(lb[:])
	bw.Write(hb)
	for _, t := range ts {
		if _, err := bw.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

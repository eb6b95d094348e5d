package cmf

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cortiq/cortiq/internal/jsonerr"
	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/tensor"
)

// Read parses a CMF file from r, whose length is size; name is used in
// errors. The returned File reads tensor data through r (or aliases r's
// bytes when r holds them: see mapfile.NewBlob); Close does not close r.
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	f, err := parse(r, size, name)
	if err != nil {
		return nil, err
	}
	f.blob = mapfile.NewBlob(r, size)
	return f, nil
}

func errorf(name, format string, args ...any) error {
	return fmt.Errorf("cmf: %s: "+format, append([]any{name}, args...)...)
}

func readAt(r io.ReaderAt, name string, off, n int64, what string) ([]byte, error) {
	buf := make([]byte, n) // callers bound n by the file size
	if _, err := r.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errorf(name, "%s [%d, %d): file truncated", what, off, off+n)
		}
		return nil, errorf(name, "%s [%d, %d): %w", what, off, off+n, err)
	}
	return buf, nil
}

func parse(r io.ReaderAt, size int64, name string) (*File, error) {
	if size < headerSize+footerSize {
		return nil, errorf(name, "file of %d bytes is too short for a CMF header and footer (%d)", size, headerSize+footerSize)
	}
	le := binary.LittleEndian
	h, err := readAt(r, name, 0, headerSize, "header")
	if err != nil {
		return nil, err
	}
	if string(h[:4]) != Magic {
		return nil, errorf(name, "not a CMF file (magic %q)", h[:4])
	}
	f := &File{Name: name, Size: size, Version: le.Uint32(h[4:])}
	if f.Version != Version {
		return nil, errorf(name, "unsupported CMF version %d (this build reads version %d)", f.Version, Version)
	}
	if sum := Checksum(h[:60]); sum != le.Uint32(h[60:]) {
		return nil, errorf(name, "header checksum mismatch (crc32c %08x, header says %08x)", sum, le.Uint32(h[60:]))
	}
	if flags := le.Uint32(h[8:]); flags != 0 {
		return nil, errorf(name, "unknown header flags %#x", flags)
	}
	align := int64(le.Uint32(h[12:]))
	if align < minAlignment || align > maxAlignment || align&(align-1) != 0 {
		return nil, errorf(name, "alignment %d is not a power of two in [%d, %d]", align, minAlignment, maxAlignment)
	}
	f.Alignment = align
	metaOff, metaLen, metaSum := le.Uint64(h[16:]), le.Uint64(h[24:]), le.Uint32(h[32:])
	payOff := le.Uint64(h[40:])

	ft, err := readAt(r, name, size-footerSize, footerSize, "footer")
	if err != nil {
		return nil, err
	}
	if string(ft[28:]) != Magic {
		return nil, errorf(name, "bad footer magic %q at offset %d (file truncated or not written to the end?)", ft[28:], size-footerSize)
	}
	if sum := Checksum(ft[:24]); sum != le.Uint32(ft[24:]) {
		return nil, errorf(name, "footer checksum mismatch (crc32c %08x, footer says %08x)", sum, le.Uint32(ft[24:]))
	}
	dirOff, dirLen, dirSum := le.Uint64(ft[0:]), le.Uint64(ft[8:]), le.Uint32(ft[16:])

	// Regions, in file order: header, metadata, payload, directory, footer.
	end := uint64(size - footerSize)
	switch {
	case metaOff != headerSize:
		return nil, errorf(name, "metadata offset %d (must be %d)", metaOff, headerSize)
	case metaLen > end-metaOff:
		return nil, errorf(name, "metadata [%d, %d) beyond end of data (%d)", metaOff, metaOff+metaLen, end)
	case payOff%uint64(align) != 0 || payOff < metaOff+metaLen || payOff > end:
		return nil, errorf(name, "payload offset %d: must be aligned to %d, after the metadata (ends at %d) and inside the file", payOff, align, metaOff+metaLen)
	case dirOff < payOff || dirOff > end || dirOff%uint64(align) != 0:
		return nil, errorf(name, "directory offset %d: must be aligned to %d and in [%d, %d]", dirOff, align, payOff, end)
	case dirLen != end-dirOff:
		return nil, errorf(name, "directory [%d, %d) must end where the footer starts (%d)", dirOff, dirOff+dirLen, end)
	}
	f.PayloadOffset = int64(payOff)

	meta, err := readAt(r, name, int64(metaOff), int64(metaLen), "metadata")
	if err != nil {
		return nil, err
	}
	if sum := Checksum(meta); sum != metaSum {
		return nil, errorf(name, "metadata checksum mismatch (crc32c %08x, header says %08x)", sum, metaSum)
	}
	if err := json.Unmarshal(meta, &f.Meta); err != nil {
		return nil, errorf(name, "metadata: %s", jsonerr.Describe(err))
	}
	dirb, err := readAt(r, name, int64(dirOff), int64(dirLen), "directory")
	if err != nil {
		return nil, err
	}
	if sum := Checksum(dirb); sum != dirSum {
		return nil, errorf(name, "directory checksum mismatch (crc32c %08x, footer says %08x)", sum, dirSum)
	}
	// Unknown keys are ignored, as docs/cmf.md promises for additions.
	var dir directory
	if err := json.Unmarshal(dirb, &dir); err != nil {
		return nil, errorf(name, "directory: %s", jsonerr.Describe(err))
	}
	if err := f.setTensors(dir.Tensors, int64(dirOff)); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) setTensors(ents []entryJSON, dirOff int64) error {
	f.Tensors = make([]Entry, len(ents))
	f.index = make(map[string]int, len(ents))
	for i, ej := range ents {
		c, err := tensor.ParseCodec(ej.Codec)
		if err != nil {
			return errorf(f.Name, "tensor %d %q: unknown codec %q", i, ej.Name, ej.Codec)
		}
		if _, dup := f.index[ej.Name]; dup {
			return errorf(f.Name, "tensor %d: duplicate name %q", i, ej.Name)
		}
		if c == tensor.BLR {
			// No rows: the length is the factors', as long as the rank
			// makes it.
			if _, err := byteLen(c, ej.Shape); err != nil {
				return errorf(f.Name, "tensor %d %q: %s %v: %v", i, ej.Name, c, ej.Shape, err)
			}
			if err := tensor.CheckStored(c, ej.Shape, ej.Length); err != nil {
				return errorf(f.Name, "tensor %d %q: length %d: %v", i, ej.Name, ej.Length, err)
			}
		} else {
			n, err := storedLen(c, ej.Shape)
			if err != nil {
				return errorf(f.Name, "tensor %d %q: %s %v: %v", i, ej.Name, c, ej.Shape, err)
			}
			if n != ej.Length {
				return errorf(f.Name, "tensor %d %q: length %d, but %s %v needs %d", i, ej.Name, ej.Length, c, ej.Shape, n)
			}
		}
		if ej.Offset%f.Alignment != 0 || ej.Offset < f.PayloadOffset || ej.Offset > dirOff || ej.Length > dirOff-ej.Offset {
			return errorf(f.Name, "tensor %d %q: data [%d, %d) not aligned to %d or outside the payload [%d, %d)", i, ej.Name, ej.Offset, ej.Offset+ej.Length, f.Alignment, f.PayloadOffset, dirOff)
		}
		f.index[ej.Name] = i
		f.Tensors[i] = Entry{Name: ej.Name, Codec: c, Shape: ej.Shape, Offset: ej.Offset, Length: ej.Length, CRC32C: ej.CRC32C}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := &f.Tensors[a], &f.Tensors[b]
		if c := cmp.Compare(ea.Offset, eb.Offset); c != 0 {
			return c
		}
		return cmp.Compare(ea.Length, eb.Length)
	})
	for k := 1; k < len(order); k++ {
		a, b := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if a.Length > 0 && b.Length > 0 && b.Offset < a.Offset+a.Length {
			return errorf(f.Name, "tensor %q data [%d, %d) overlaps tensor %q data [%d, %d)", b.Name, b.Offset, b.Offset+b.Length, a.Name, a.Offset, a.Offset+a.Length)
		}
	}
	return nil
}

// byteLen is tensor.ByteLen with the shape first bounded so that no product
// of dimensions can overflow.
func byteLen(c tensor.Codec, shape []int) (int64, error) {
	elems := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in %v", shape)
		}
		if d != 0 && elems > (1<<50)/int64(d) {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		elems *= int64(d)
	}
	return tensor.ByteLen(c, shape)
}

// storedLen is the bytes the file stores for a tensor: its rows (byteLen),
// then the codec's side field if it has one (tensor.StoredLen).
func storedLen(c tensor.Codec, shape []int) (int64, error) {
	if _, err := byteLen(c, shape); err != nil {
		return 0, err
	}
	return tensor.StoredLen(c, shape)
}

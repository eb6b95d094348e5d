// Package cmf reads and writes CMF files, the engine's own model container
// (specified in docs/cmf.md): a fixed header, a JSON metadata block (the
// normalized model.Arch, the tokenizer material, the provenance of the
// import), the tensor data with every tensor aligned to 256 bytes, a JSON
// tensor directory with a CRC-32C per tensor, and a fixed footer.
//
// A File is read through an io.ReaderAt. Open memory-maps the file on linux
// and darwin, and tensor data then aliases the mapping without a copy;
// elsewhere (GOOS=js included, where the reader may issue HTTP range
// requests) each tensor is read into memory when asked for. Opening checks
// the structure completely (every offset, length, overlap and the checksums
// of header, footer, metadata and directory) but not the tensor checksums,
// which VerifyTensor and Verify check on request, and CheckData and CheckSum
// check on data the caller read (importer checks every tensor on its first
// use).
//
// Writer streams: the header and metadata go out first, then each tensor as
// it is given, then the directory and footer on Close. It needs a plain
// io.Writer, never seeks, and holds one tensor at a time.
package cmf

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Version is the format version this package reads and writes.
const Version = 1

// Magic opens the header and closes the footer.
const Magic = "CMF\x00"

// Alignment of tensor data written by this package: WebGPU's
// minStorageBufferOffsetAlignment, so tensors can be bound at their offsets
// in one uploaded buffer (see docs/cmf.md).
const Alignment = 256

const (
	headerSize = 64
	footerSize = 32
	// Limits on what a reader accepts, so that no header field can make it
	// allocate more than the file holds or loop for long.
	minAlignment = 8
	maxAlignment = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C the format uses.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Metadata is the JSON metadata block.
type Metadata struct {
	Arch       model.Arch           `json:"arch"`
	Tokenizer  *model.TokenizerData `json:"tokenizer,omitempty"`
	Provenance model.Provenance     `json:"provenance"`
	CreatedBy  string               `json:"created_by,omitempty"`
	// Extra holds free-form keys; readers ignore those they do not know.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Entry is one tensor of the directory.
type Entry struct {
	Name   string       `json:"name"`
	Codec  tensor.Codec `json:"-"`
	Shape  []int        `json:"shape"`
	Offset int64        `json:"offset"` // absolute
	Length int64        `json:"length"`
	CRC32C uint32       `json:"crc32c"`
}

// entryJSON is Entry as the directory spells it (the codec by name).
type entryJSON struct {
	Name   string `json:"name"`
	Codec  string `json:"codec"`
	Shape  []int  `json:"shape"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	CRC32C uint32 `json:"crc32c"`
}

type directory struct {
	Tensors []entryJSON `json:"tensors"`
}

// File is an opened CMF file. Its exported fields must not be modified.
type File struct {
	Name          string // the name errors use
	Size          int64
	Version       uint32
	Alignment     int64
	PayloadOffset int64
	Meta          Metadata
	Tensors       []Entry // directory order

	blob  *mapfile.Blob
	index map[string]int
}

// Close releases the mapping and the file. Tensor data obtained from a mapped
// file must not be used afterwards.
func (f *File) Close() error { return f.blob.Close() }

// Mapped reports whether tensor data aliases a memory mapping.
func (f *File) Mapped() bool { return f.blob.Mapped() }

// Entry returns the directory entry of the named tensor.
func (f *File) Entry(name string) (*Entry, bool) {
	i, ok := f.index[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Names lists the tensor names in directory order.
func (f *File) Names() []string {
	names := make([]string, len(f.Tensors))
	for i := range f.Tensors {
		names[i] = f.Tensors[i].Name
	}
	return names
}

// Tensor returns the named tensor. On a mapped file its data aliases the
// mapping; otherwise it is read (and not verified: see VerifyTensor).
func (f *File) Tensor(name string) (*tensor.Tensor, error) {
	e, ok := f.Entry(name)
	if !ok {
		return nil, fmt.Errorf("cmf: %s: no tensor %q", f.Name, name)
	}
	stored, err := f.data(e)
	if err != nil {
		return nil, err
	}
	// A codec with a side field stores it after the rows (checked at open).
	data, side, err := tensor.SplitStored(e.Codec, e.Shape, stored)
	if err != nil {
		return nil, fmt.Errorf("cmf: %s: tensor %q: %w", f.Name, e.Name, err)
	}
	return &tensor.Tensor{Name: e.Name, Codec: e.Codec, Shape: append([]int(nil), e.Shape...), Data: data, Side: side}, nil
}

func (f *File) data(e *Entry) ([]byte, error) {
	buf, err := f.blob.Range(e.Offset, e.Length) // bounded by the file size at open
	if err != nil {
		return nil, f.readError(e.Name, e.Offset, e.Length, err)
	}
	return buf, nil
}

// readError words a failed read of a tensor's bytes [start, start+n).
func (f *File) readError(name string, start, n int64, err error) error {
	if errors.Is(err, mapfile.ErrClosed) {
		return fmt.Errorf("cmf: %s: file is closed", f.Name)
	}
	return fmt.Errorf("cmf: %s: tensor %q: reading [%d, %d): %w", f.Name, name, start, start+n, err)
}

// VerifyTensor checks the named tensor's data against its CRC-32C.
func (f *File) VerifyTensor(name string) error {
	e, ok := f.Entry(name)
	if !ok {
		return fmt.Errorf("cmf: %s: no tensor %q", f.Name, name)
	}
	return f.verify(e)
}

func (f *File) verify(e *Entry) error {
	var sum uint32
	if f.blob.Mapped() {
		data, err := f.blob.Range(e.Offset, e.Length)
		if err != nil {
			return f.readError(e.Name, e.Offset, e.Length, err)
		}
		sum = Checksum(data)
	} else {
		// Stream through a bounded buffer so verifying a large tensor does
		// not hold it in memory.
		h := crc32.New(castagnoli)
		if _, err := io.Copy(h, io.NewSectionReader(f.blob, e.Offset, e.Length)); err != nil {
			if errors.Is(err, mapfile.ErrClosed) {
				return fmt.Errorf("cmf: %s: file is closed", f.Name)
			}
			return fmt.Errorf("cmf: %s: tensor %q: %w", f.Name, e.Name, err)
		}
		sum = h.Sum32()
	}
	return f.checkSum(e, sum)
}

// ChecksumError reports tensor data that does not match the CRC-32C the
// directory records for it: the file is damaged.
type ChecksumError struct {
	File, Tensor   string
	Offset, Length int64  // the tensor's data in the file
	Got, Want      uint32 // CRC-32C of the data read, and the directory's
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("cmf: %s: tensor %q: checksum mismatch, the file is damaged (data [%d, %d) has crc32c %08x, the directory says %08x)", e.File, e.Tensor, e.Offset, e.Offset+e.Length, e.Got, e.Want)
}

func (f *File) checkSum(e *Entry, sum uint32) error {
	if sum != e.CRC32C {
		return &ChecksumError{File: f.Name, Tensor: e.Name, Offset: e.Offset, Length: e.Length, Got: sum, Want: e.CRC32C}
	}
	return nil
}

// CheckData checks data, the whole of the named tensor's bytes as read by
// the caller, against the tensor's CRC-32C, without reading the file again.
// The bytes may come in pieces, in file order (more): a tensor's rows,
// then its side field (tensor.Tensor.Data, then Side). A mismatch is a
// *ChecksumError.
func (f *File) CheckData(name string, data []byte, more ...[]byte) error {
	e, ok := f.Entry(name)
	if !ok {
		return fmt.Errorf("cmf: %s: no tensor %q", f.Name, name)
	}
	n, sum := int64(len(data)), Checksum(data)
	for _, p := range more {
		n, sum = n+int64(len(p)), UpdateChecksum(sum, p)
	}
	if n != e.Length {
		return fmt.Errorf("cmf: %s: tensor %q: %d bytes to check, the tensor has %d", f.Name, name, n, e.Length)
	}
	return f.checkSum(e, sum)
}

// CheckSum compares sum, the CRC-32C of the named tensor's whole data
// computed by the caller (for instance with UpdateChecksum over data read
// in pieces), with the directory's. A mismatch is a *ChecksumError.
func (f *File) CheckSum(name string, sum uint32) error {
	e, ok := f.Entry(name)
	if !ok {
		return fmt.Errorf("cmf: %s: no tensor %q", f.Name, name)
	}
	return f.checkSum(e, sum)
}

// UpdateChecksum returns the CRC-32C crc extended by p (crc32.Update with
// the format's polynomial); Checksum(p) is UpdateChecksum(0, p).
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// Verify checks every tensor's checksum and returns the first mismatch.
func (f *File) Verify() error {
	for i := range f.Tensors {
		if err := f.verify(&f.Tensors[i]); err != nil {
			return err
		}
	}
	return nil
}

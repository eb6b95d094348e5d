package resolve

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/safetensors"
)

// maxJSONCheck bounds the JSON files Check reads whole (configs,
// tokenizers, indexes).
const maxJSONCheck = 256 << 20

// Check returns a structural check for a file named name (a hub file path
// or a local path), chosen by its extension, for use where no sha256 is
// known (storage/download's Options.Check): GGUF and safetensors must parse
// and every tensor's declared data must lie inside the file; CMF must parse
// and every tensor must match its CRC-32C; JSON must parse. It returns nil
// for other extensions, whose structure is not known.
func Check(name string) func(r io.ReaderAt, size int64) error {
	return checker(name, true)
}

func checker(name string, full bool) func(r io.ReaderAt, size int64) error {
	base := path.Base(strings.ReplaceAll(name, `\`, "/"))
	switch strings.ToLower(path.Ext(base)) {
	case ".gguf":
		return func(r io.ReaderAt, size int64) error {
			f, err := gguf.Read(r, size, base)
			if err != nil {
				return err
			}
			return f.Close()
		}
	case ".safetensors":
		return func(r io.ReaderAt, size int64) error {
			f, err := safetensors.Read(r, size, base)
			if err != nil {
				return err
			}
			return f.Close()
		}
	case ".cmf":
		return func(r io.ReaderAt, size int64) error {
			f, err := cmf.Read(r, size, base)
			if err != nil {
				return err
			}
			defer f.Close()
			if full {
				return f.Verify()
			}
			return nil
		}
	case ".json":
		return func(r io.ReaderAt, size int64) error {
			if size > maxJSONCheck {
				return fmt.Errorf("%s: %d bytes, more than the %d a JSON file may have", base, size, maxJSONCheck)
			}
			b, err := io.ReadAll(io.NewSectionReader(r, 0, size))
			if err != nil {
				return err
			}
			if !json.Valid(b) {
				return fmt.Errorf("%s: not valid JSON", base)
			}
			return nil
		}
	}
	return nil
}

// checkCached reports whether a file found in the download cache still
// passes the cheap structural check (CMF tensor checksums are left to the
// loader) and, for a pinned name, has the pinned size.
func checkCached(p string, hf HubFile) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil // a directory (HF layout) or something the loader judges
	}
	if hf.Size > 0 && fi.Size() != hf.Size {
		return fmt.Errorf("%s: %d bytes, the pinned size is %d", p, fi.Size(), hf.Size)
	}
	if c := checker(p, false); c != nil {
		return c(f, fi.Size())
	}
	return nil
}

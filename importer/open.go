package importer

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/model"
)

// hfFileFormats are the single-file formats Open recognizes by magic.
var hfFileFormats = []struct {
	name, magic string
	open        func(string) (*model.Model, error)
}{
	{"GGUF", "GGUF", FromGGUF},
	{"CMF", cmf.Magic, FromCMF},
}

// Open imports a model from a path: a directory with config.json (Hugging
// Face), or a GGUF or CMF file recognized by its magic bytes.
func Open(path string) (*model.Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("importer: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "config.json")); err != nil {
			return nil, fmt.Errorf("importer: %s: a directory must hold a Hugging Face checkpoint (config.json not found)", path)
		}
		return FromHF(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("importer: %w", err)
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("importer: %s: too short to be a model file", path)
	}
	for _, ff := range hfFileFormats {
		if bytes.HasPrefix(magic[:], []byte(ff.magic)) {
			if ff.open == nil {
				return nil, fmt.Errorf("importer: %s: %s files are not supported by this build", path, ff.name)
			}
			return ff.open(path)
		}
	}
	if filepath.Base(path) == "config.json" {
		return FromHF(filepath.Dir(path))
	}
	return nil, fmt.Errorf("importer: %s: not a GGUF or CMF file (magic %q) nor a Hugging Face directory", path, magic[:])
}

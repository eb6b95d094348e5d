package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/model"
)

// ErrNotModel is wrapped by Open's error for a path that is none of the
// formats it reads. The error names the path but never echoes the file's
// bytes (the path may name any readable file, /etc/shadow included).
var ErrNotModel = errors.New("not a model file (expected GGUF, CMF, safetensors or an HF directory)")

// hfFileFormats are the single-file formats Open recognizes by magic.
var hfFileFormats = []struct {
	name, magic string
	open        func(string) (*model.Model, error)
}{
	{"GGUF", "GGUF", FromGGUF},
	{"CMF", cmf.Magic, FromCMF},
}

// Open imports a model from a path: a directory with config.json (Hugging
// Face), a GGUF or CMF file recognized by its magic bytes, or the
// config.json or a .safetensors file of a Hugging Face directory. Only
// regular files are opened: a FIFO, device or socket is refused without
// blocking. Errors name path as given, say "no such file or directory" or
// "permission denied" for what stat reports, and wrap ErrNotModel for
// anything else that is not a model.
//
// A cancelled ctx stops the import: Open returns ctx's error and leaves
// nothing open.
func Open(ctx context.Context, path string) (*model.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := open(ctx, path)
	if err == nil && ctx.Err() != nil {
		if m.Close != nil {
			m.Close()
		}
		return nil, ctx.Err()
	}
	return m, err
}

func open(ctx context.Context, path string) (*model.Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, pathError(path, err)
	}
	if st.IsDir() {
		cfg, err := os.Stat(filepath.Join(path, "config.json"))
		if err != nil || !cfg.Mode().IsRegular() {
			return nil, fmt.Errorf("importer: %s: %w", path, ErrNotModel)
		}
		return fromHF(ctx, path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("importer: %w; expected a GGUF, CMF or safetensors file or an HF directory", &mapfile.NotRegularError{Path: path, Mode: st.Mode()})
	}
	f, err := mapfile.OpenRegular(path)
	if err != nil {
		return nil, pathError(path, err)
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	if err == nil {
		for _, ff := range hfFileFormats {
			if bytes.HasPrefix(magic[:], []byte(ff.magic)) {
				if ff.open == nil {
					return nil, fmt.Errorf("importer: %s: %s files are not supported by this build", path, ff.name)
				}
				return ff.open(path)
			}
		}
	}
	base := filepath.Base(path)
	if base == "config.json" || strings.HasSuffix(base, ".safetensors") {
		// A file of a Hugging Face directory stands for the directory.
		dir := filepath.Dir(path)
		if cfg, err := os.Stat(filepath.Join(dir, "config.json")); err == nil && cfg.Mode().IsRegular() {
			return fromHF(ctx, dir)
		}
		if base != "config.json" {
			return nil, fmt.Errorf("importer: %s: no config.json beside this safetensors file (a Hugging Face checkpoint is a directory holding config.json and the .safetensors files)", path)
		}
	}
	return nil, fmt.Errorf("importer: %s: %w", path, ErrNotModel)
}

// pathError words a stat or open failure with the path the user gave, not
// a resolved one, and without the operation's internals.
func pathError(path string, err error) error {
	var nr *mapfile.NotRegularError
	switch {
	case errors.As(err, &nr):
		return fmt.Errorf("importer: %w", err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// ENOTDIR too: "x/y: not a directory" would tell that x is a file.
		return fmt.Errorf("importer: %s: no such file or directory", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("importer: %s: permission denied", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("importer: %s: %v", path, err)
}

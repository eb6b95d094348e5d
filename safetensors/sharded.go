package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortiq/cortiq/internal/jsonerr"
	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/tensor"
)

// IndexFile is the name of the index of a sharded checkpoint.
const IndexFile = "model.safetensors.index.json"

// Set is a checkpoint made of one or more safetensors files, looked up by
// tensor name.
type Set struct {
	files  []*File
	paths  []string
	byName map[string]*File
}

// OpenDir opens the checkpoint in dir: the shards listed by
// model.safetensors.index.json when present, else model.safetensors, else
// every *.safetensors file of the directory (reference.safetensors aside).
func OpenDir(dir string) (*Set, error) {
	idx := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(idx); err == nil {
		return OpenIndex(idx)
	}
	single := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(single); err == nil {
		return OpenFiles(single)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", dir, err)
	}
	var paths []string
	for _, m := range matches {
		if filepath.Base(m) != "reference.safetensors" {
			paths = append(paths, m)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("safetensors: %s: no model.safetensors, %s or *.safetensors file", dir, IndexFile)
	}
	sort.Strings(paths)
	return OpenFiles(paths...)
}

type index struct {
	WeightMap map[string]string `json:"weight_map"`
}

// OpenIndex opens a sharded checkpoint from its index file. Every tensor the
// weight_map names must be present in the shard it names.
func OpenIndex(indexPath string) (*Set, error) {
	b, err := mapfile.ReadFile(indexPath)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var ix index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", indexPath, jsonerr.Error(err))
	}
	if len(ix.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: %s: empty weight_map", indexPath)
	}
	dir := filepath.Dir(indexPath)
	shardSet := map[string]bool{}
	for tname, shard := range ix.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || strings.ContainsAny(shard, `/\`) || shard == ".." || shard == "." {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: shard name %q must be a plain file name", indexPath, tname, shard)
		}
		shardSet[shard] = true
	}
	var paths []string
	for s := range shardSet {
		paths = append(paths, filepath.Join(dir, s))
	}
	sort.Strings(paths)
	set, err := OpenFiles(paths...)
	if err != nil {
		return nil, err
	}
	for tname, shard := range ix.WeightMap {
		f, ok := set.byName[tname]
		if !ok || filepath.Base(f.name) != shard {
			set.Close()
			return nil, fmt.Errorf("safetensors: %s: tensor %q is mapped to %s but is not in it", indexPath, tname, shard)
		}
	}
	return set, nil
}

// OpenFiles opens several safetensors files as one checkpoint; a tensor name
// may appear in only one of them.
func OpenFiles(paths ...string) (*Set, error) {
	var files []*File
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		files = append(files, f)
	}
	s, err := NewSet(files...)
	if err != nil {
		for _, f := range files {
			f.Close()
		}
	}
	return s, err
}

// NewSet makes one checkpoint of opened files (for instance ones Read
// through HTTP range requests); a tensor name may appear in only one of
// them. Close closes the files.
func NewSet(files ...*File) (*Set, error) {
	s := &Set{byName: map[string]*File{}}
	for _, f := range files {
		s.files = append(s.files, f)
		s.paths = append(s.paths, f.name)
		for _, n := range f.order {
			if prev, dup := s.byName[n]; dup {
				return nil, fmt.Errorf("safetensors: tensor %q is in both %s and %s", n, prev.name, f.name)
			}
			s.byName[n] = f
		}
	}
	return s, nil
}

// Mapped reports whether every file's tensors alias a memory mapping (or
// memory), so that Tensor reads nothing.
func (s *Set) Mapped() bool {
	for _, f := range s.files {
		if !f.blob.Mapped() {
			return false
		}
	}
	return true
}

// ReadRange reads len(dst) bytes of the named tensor's data, starting off
// bytes into it.
func (s *Set) ReadRange(name string, off int64, dst []byte) error {
	f, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("safetensors: no tensor %q in %s", name, strings.Join(s.paths, ", "))
	}
	return f.ReadRange(name, off, dst)
}

// Paths lists the files of the set.
func (s *Set) Paths() []string { return append([]string(nil), s.paths...) }

// Names lists every tensor of the set, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether the set holds a tensor.
func (s *Set) Has(name string) bool { _, ok := s.byName[name]; return ok }

// File returns the file holding a tensor.
func (s *Set) File(name string) (*File, bool) { f, ok := s.byName[name]; return f, ok }

// Info describes a tensor.
func (s *Set) Info(name string) (Info, bool) {
	f, ok := s.byName[name]
	if !ok {
		return Info{}, false
	}
	return f.Info(name)
}

// Tensor returns a tensor (see File.Tensor).
func (s *Set) Tensor(name string) (*tensor.Tensor, error) {
	f, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: no tensor %q in %s", name, strings.Join(s.paths, ", "))
	}
	return f.Tensor(name)
}

// Close closes every file of the set.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

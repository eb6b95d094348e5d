//go:build js

package opfs

import (
	"errors"
	gofs "io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/hack-pad/hackpadfs"
)

// FS is a hackpadfs file system rooted at a directory of the origin's OPFS.
// It is safe for concurrent use by multiple goroutines.
type FS struct {
	root js.Value // FileSystemDirectoryHandle of this FS's root
	base string   // slash path of root inside OPFS ("" for the OPFS root)
}

var (
	_ hackpadfs.OpenFileFS  = (*FS)(nil)
	_ hackpadfs.MkdirFS     = (*FS)(nil)
	_ hackpadfs.MkdirAllFS  = (*FS)(nil)
	_ hackpadfs.RemoveFS    = (*FS)(nil)
	_ hackpadfs.RemoveAllFS = (*FS)(nil)
	_ hackpadfs.RenameFS    = (*FS)(nil)
	_ hackpadfs.StatFS      = (*FS)(nil)
	_ hackpadfs.ReadDirFS   = (*FS)(nil)
	_ hackpadfs.ChmodFS     = (*FS)(nil)
	_ hackpadfs.ChtimesFS   = (*FS)(nil)
	_ hackpadfs.SubFS       = (*FS)(nil)
)

// mu serializes namespace changes and the shared-handle registry across every
// FS of this Wasm instance. The JS side is single-threaded anyway; the lock
// keeps check-then-act sequences (O_EXCL, Mkdir) atomic across the awaits
// where other goroutines would otherwise interleave.
var (
	mu      sync.Mutex
	handles = map[string]*shared{} // OPFS path -> open sync access handle
)

// Available reports whether this JS context exposes OPFS at all. File I/O
// additionally needs a dedicated Worker (see ErrNoSyncAccess).
func Available() bool {
	st := js.Global().Get("navigator").Get("storage")
	return st.Truthy() && st.Get("getDirectory").Type() == js.TypeFunction
}

// syncAccess reports whether this context has sync access handles, which
// browsers expose only in dedicated Workers.
func syncAccess() bool {
	c := js.Global().Get("FileSystemFileHandle")
	return c.Type() == js.TypeFunction && c.Get("prototype").Get("createSyncAccessHandle").Type() == js.TypeFunction
}

// New returns an FS rooted at dir (a slash-separated path inside the
// origin's OPFS; "" or "." is the OPFS root), creating dir if needed.
func New(dir string) (*FS, error) {
	if dir == "" {
		dir = "."
	}
	if !gofs.ValidPath(dir) {
		return nil, &hackpadfs.PathError{Op: "opfs.New", Path: dir, Err: hackpadfs.ErrInvalid}
	}
	if !Available() {
		return nil, &hackpadfs.PathError{Op: "opfs.New", Path: dir, Err: ErrUnavailable}
	}
	root, err := await(js.Global().Get("navigator").Get("storage").Call("getDirectory"))
	if err != nil {
		return nil, &hackpadfs.PathError{Op: "opfs.New", Path: dir, Err: err}
	}
	fsys := &FS{root: root}
	if dir == "." {
		return fsys, nil
	}
	if err := fsys.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	return fsys.sub(dir)
}

// Sub returns the FS rooted at the existing directory dir.
func (f *FS) Sub(dir string) (hackpadfs.FS, error) {
	return f.sub(dir)
}

func (f *FS) sub(dir string) (*FS, error) {
	parts, err := split("sub", dir)
	if err != nil {
		return nil, err
	}
	h, err := f.walkDir(parts)
	if err != nil {
		return nil, &hackpadfs.PathError{Op: "sub", Path: dir, Err: err}
	}
	return &FS{root: h, base: f.key(parts)}, nil
}

func split(op, name string) ([]string, error) {
	if !gofs.ValidPath(name) {
		return nil, &hackpadfs.PathError{Op: op, Path: name, Err: hackpadfs.ErrInvalid}
	}
	if name == "." {
		return nil, nil
	}
	return strings.Split(name, "/"), nil
}

// key names an entry across FS instances, for the handle registry.
func (f *FS) key(parts []string) string {
	return path.Join(append([]string{"/", f.base}, parts...)...)
}

var (
	createOpt    = js.ValueOf(map[string]any{"create": true})
	recursiveOpt = js.ValueOf(map[string]any{"recursive": true})
)

// walkDir resolves parts as a chain of directories.
func (f *FS) walkDir(parts []string) (js.Value, error) {
	h := f.root
	for _, p := range parts {
		next, err := awaitCall(h, "getDirectoryHandle", p)
		switch {
		case err == nil:
			h = next
		case isDOM(err, "TypeMismatchError"):
			return js.Value{}, hackpadfs.ErrNotDir
		case isDOM(err, "NotFoundError"):
			return js.Value{}, hackpadfs.ErrNotExist
		default:
			return js.Value{}, err
		}
	}
	return h, nil
}

// entry is a resolved name: its parent directory and its own handle.
type entry struct {
	parent js.Value
	base   string
	h      js.Value
	dir    bool
}

// lookup resolves parts to an existing entry. An empty parts is the root.
func (f *FS) lookup(parts []string) (entry, error) {
	if len(parts) == 0 {
		return entry{h: f.root, dir: true, base: "."}, nil
	}
	parent, err := f.walkDir(parts[:len(parts)-1])
	if err != nil {
		return entry{}, err
	}
	base := parts[len(parts)-1]
	e, err := child(parent, base)
	return e, err
}

func child(parent js.Value, base string) (entry, error) {
	h, err := awaitCall(parent, "getFileHandle", base)
	if err == nil {
		return entry{parent: parent, base: base, h: h}, nil
	}
	if isDOM(err, "TypeMismatchError") {
		h, err = awaitCall(parent, "getDirectoryHandle", base)
		if err == nil {
			return entry{parent: parent, base: base, h: h, dir: true}, nil
		}
	}
	if isDOM(err, "NotFoundError") {
		return entry{}, hackpadfs.ErrNotExist
	}
	return entry{}, err
}

// Open opens name for reading.
func (f *FS) Open(name string) (hackpadfs.File, error) {
	return f.OpenFile(name, hackpadfs.FlagReadOnly, 0)
}

// OpenFile opens name with os.OpenFile semantics; perm is ignored because
// OPFS has no permission bits.
func (f *FS) OpenFile(name string, flag int, perm hackpadfs.FileMode) (hackpadfs.File, error) {
	pathErr := func(err error) error { return &hackpadfs.PathError{Op: "open", Path: name, Err: err} }
	parts, err := split("open", name)
	if err != nil {
		return nil, err
	}
	writable := flag&(hackpadfs.FlagWriteOnly|hackpadfs.FlagReadWrite) != 0
	if flag&hackpadfs.FlagCreate != 0 && !syncAccess() {
		// Fail before creating an entry that could never be written.
		return nil, pathErr(ErrNoSyncAccess)
	}
	mu.Lock()
	defer mu.Unlock()

	var e entry
	if len(parts) == 0 {
		e, _ = f.lookup(nil)
	} else {
		parent, err := f.walkDir(parts[:len(parts)-1])
		if err != nil {
			return nil, pathErr(err)
		}
		base := parts[len(parts)-1]
		e, err = child(parent, base)
		switch {
		case err == nil:
			if flag&hackpadfs.FlagCreate != 0 && flag&hackpadfs.FlagExclusive != 0 {
				return nil, pathErr(hackpadfs.ErrExist)
			}
		case errors.Is(err, hackpadfs.ErrNotExist) && flag&hackpadfs.FlagCreate != 0:
			h, err := awaitCall(parent, "getFileHandle", base, createOpt)
			if err != nil {
				return nil, pathErr(err)
			}
			e = entry{parent: parent, base: base, h: h}
		default:
			return nil, pathErr(err)
		}
	}
	if e.dir {
		if writable || flag&hackpadfs.FlagTruncate != 0 {
			return nil, pathErr(hackpadfs.ErrIsDir)
		}
		return &file{fs: f, name: name, dir: e.h, isDir: true}, nil
	}
	key := f.key(parts)
	sh, err := acquire(key, e.h)
	if err != nil {
		return nil, pathErr(err)
	}
	if flag&hackpadfs.FlagTruncate != 0 {
		if _, err := call(sh.h, "truncate", 0); err != nil {
			releaseLocked(key, sh)
			return nil, pathErr(err)
		}
	}
	return &file{fs: f, name: name, key: key, fh: e.h, sh: sh, flag: flag}, nil
}

// Create creates or truncates name for reading and writing.
func (f *FS) Create(name string) (hackpadfs.File, error) {
	return f.OpenFile(name, hackpadfs.FlagReadWrite|hackpadfs.FlagCreate|hackpadfs.FlagTruncate, 0o666)
}

// Mkdir creates the directory name; its parent must exist.
func (f *FS) Mkdir(name string, perm hackpadfs.FileMode) error {
	pathErr := func(err error) error { return &hackpadfs.PathError{Op: "mkdir", Path: name, Err: err} }
	parts, err := split("mkdir", name)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return pathErr(hackpadfs.ErrExist)
	}
	mu.Lock()
	defer mu.Unlock()
	parent, err := f.walkDir(parts[:len(parts)-1])
	if err != nil {
		return pathErr(err)
	}
	base := parts[len(parts)-1]
	if _, err := child(parent, base); err == nil {
		return pathErr(hackpadfs.ErrExist)
	} else if !errors.Is(err, hackpadfs.ErrNotExist) {
		return pathErr(err)
	}
	if _, err := awaitCall(parent, "getDirectoryHandle", base, createOpt); err != nil {
		return pathErr(err)
	}
	return nil
}

// MkdirAll creates name and any missing parents.
func (f *FS) MkdirAll(name string, perm hackpadfs.FileMode) error {
	parts, err := split("mkdirall", name)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	h := f.root
	for i, p := range parts {
		next, err := awaitCall(h, "getDirectoryHandle", p, createOpt)
		if err != nil {
			if isDOM(err, "TypeMismatchError") {
				err = hackpadfs.ErrNotDir
			}
			return &hackpadfs.PathError{Op: "mkdir", Path: strings.Join(parts[:i+1], "/"), Err: err}
		}
		h = next
	}
	return nil
}

// openUnder reports whether key or anything below it is open in this
// instance. Callers hold mu.
func openUnder(key string) bool {
	if _, ok := handles[key]; ok {
		return true
	}
	prefix := key + "/"
	if key == "/" {
		prefix = key
	}
	for k := range handles {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// Remove removes a file or an empty directory.
func (f *FS) Remove(name string) error {
	pathErr := func(err error) error { return &hackpadfs.PathError{Op: "remove", Path: name, Err: err} }
	parts, err := split("remove", name)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return pathErr(hackpadfs.ErrInvalid)
	}
	mu.Lock()
	defer mu.Unlock()
	parent, err := f.walkDir(parts[:len(parts)-1])
	if err != nil {
		return pathErr(err)
	}
	if _, ok := handles[f.key(parts)]; ok {
		return pathErr(ErrLocked)
	}
	if _, err := awaitCall(parent, "removeEntry", parts[len(parts)-1]); err != nil {
		switch {
		case isDOM(err, "NotFoundError"):
			err = hackpadfs.ErrNotExist
		case isDOM(err, "InvalidModificationError"):
			err = hackpadfs.ErrNotEmpty
		}
		return pathErr(err)
	}
	return nil
}

// RemoveAll removes name and everything below it; a missing name is not an
// error.
func (f *FS) RemoveAll(name string) error {
	pathErr := func(err error) error { return &hackpadfs.PathError{Op: "removeall", Path: name, Err: err} }
	parts, err := split("removeall", name)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return pathErr(hackpadfs.ErrInvalid)
	}
	mu.Lock()
	defer mu.Unlock()
	parent, err := f.walkDir(parts[:len(parts)-1])
	if errors.Is(err, hackpadfs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return pathErr(err)
	}
	if openUnder(f.key(parts)) {
		return pathErr(ErrLocked)
	}
	if _, err := awaitCall(parent, "removeEntry", parts[len(parts)-1], recursiveOpt); err != nil {
		if isDOM(err, "NotFoundError") {
			return nil
		}
		return pathErr(err)
	}
	return nil
}

// Rename moves oldname to newname, replacing an existing file there. Files
// move atomically (FileSystemHandle.move); directories are recreated at
// newname, their files moved over, and the old tree removed.
func (f *FS) Rename(oldname, newname string) error {
	linkErr := func(err error) error {
		return &hackpadfs.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	oldParts, err := split("rename", oldname)
	if err != nil {
		return linkErr(hackpadfs.ErrInvalid)
	}
	newParts, err := split("rename", newname)
	if err != nil {
		return linkErr(hackpadfs.ErrInvalid)
	}
	if len(oldParts) == 0 || len(newParts) == 0 {
		return linkErr(hackpadfs.ErrInvalid)
	}
	mu.Lock()
	defer mu.Unlock()
	src, err := f.lookup(oldParts)
	if err != nil {
		return linkErr(err)
	}
	if oldname == newname {
		if src.dir {
			return linkErr(hackpadfs.ErrExist)
		}
		return nil
	}
	newParent, err := f.walkDir(newParts[:len(newParts)-1])
	if err != nil {
		return linkErr(err)
	}
	newBase := newParts[len(newParts)-1]
	dst, err := child(newParent, newBase)
	switch {
	case err == nil && dst.dir:
		return linkErr(hackpadfs.ErrExist)
	case err == nil && src.dir:
		return linkErr(hackpadfs.ErrNotDir)
	case err != nil && !errors.Is(err, hackpadfs.ErrNotExist):
		return linkErr(err)
	}
	if openUnder(f.key(oldParts)) || (err == nil && openUnder(f.key(newParts))) {
		return linkErr(ErrLocked)
	}
	if !src.dir {
		if _, err := awaitCall(src.h, "move", newParent, newBase); err != nil {
			return linkErr(err)
		}
		return nil
	}
	if strings.HasPrefix(newname+"/", oldname+"/") {
		return linkErr(hackpadfs.ErrInvalid)
	}
	if err := moveTree(src.h, newParent, newBase); err != nil {
		return linkErr(err)
	}
	if _, err := awaitCall(src.parent, "removeEntry", src.base, recursiveOpt); err != nil {
		return linkErr(err)
	}
	return nil
}

// moveTree recreates directory src as dstParent/dstBase and moves every file
// of src's tree into the new tree, leaving src holding only empty directories.
func moveTree(src, dstParent js.Value, dstBase string) error {
	dst, err := awaitCall(dstParent, "getDirectoryHandle", dstBase, createOpt)
	if err != nil {
		return err
	}
	entries, err := listDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.dir {
			if err := moveTree(e.h, dst, e.name); err != nil {
				return err
			}
			continue
		}
		if _, err := awaitCall(e.h, "move", dst, e.name); err != nil {
			return err
		}
	}
	return nil
}

type rawEntry struct {
	name string
	h    js.Value
	dir  bool
}

// listDir returns a directory's entries sorted by name.
func listDir(dir js.Value) ([]rawEntry, error) {
	it, err := call(dir, "entries")
	if err != nil {
		return nil, err
	}
	var out []rawEntry
	for {
		r, err := awaitCall(it, "next")
		if err != nil {
			return nil, err
		}
		if r.Get("done").Bool() {
			break
		}
		v := r.Get("value")
		h := v.Index(1)
		out = append(out, rawEntry{name: v.Index(0).String(), h: h, dir: h.Get("kind").String() == "directory"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// Stat describes name.
func (f *FS) Stat(name string) (hackpadfs.FileInfo, error) {
	parts, err := split("stat", name)
	if err != nil {
		return nil, err
	}
	e, err := f.lookup(parts)
	if err != nil {
		return nil, &hackpadfs.PathError{Op: "stat", Path: name, Err: err}
	}
	fi, err := statEntry(path.Base(name), e.h, e.dir)
	if err != nil {
		return nil, &hackpadfs.PathError{Op: "stat", Path: name, Err: err}
	}
	return fi, nil
}

func statEntry(base string, h js.Value, dir bool) (*fileInfo, error) {
	if dir {
		return &fileInfo{name: base, dir: true}, nil
	}
	// getFile works while a sync access handle is open (measured) and sees
	// its unflushed writes.
	file, err := awaitCall(h, "getFile")
	if err != nil {
		return nil, err
	}
	return &fileInfo{
		name: base,
		size: int64(file.Get("size").Float()),
		mod:  time.UnixMilli(int64(file.Get("lastModified").Float())),
	}, nil
}

// ReadDir lists the directory name sorted by file name.
func (f *FS) ReadDir(name string) ([]hackpadfs.DirEntry, error) {
	parts, err := split("readdir", name)
	if err != nil {
		return nil, err
	}
	h, err := f.walkDir(parts)
	switch {
	case errors.Is(err, hackpadfs.ErrNotDir) && len(parts) > 0:
		// Distinguish "name is a file" from "a parent is a file".
		if _, perr := f.walkDir(parts[:len(parts)-1]); perr == nil {
			return nil, &hackpadfs.PathError{Op: "readdir", Path: name, Err: hackpadfs.ErrNotDir}
		}
		return nil, &hackpadfs.PathError{Op: "open", Path: name, Err: err}
	case err != nil:
		return nil, &hackpadfs.PathError{Op: "open", Path: name, Err: err}
	}
	entries, err := readDirEntries(h)
	if err != nil {
		return nil, &hackpadfs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return entries, nil
}

func readDirEntries(dir js.Value) ([]hackpadfs.DirEntry, error) {
	raw, err := listDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]hackpadfs.DirEntry, len(raw))
	for i, e := range raw {
		out[i] = &dirEntry{e: e}
	}
	return out, nil
}

// Chmod only checks that name exists: OPFS has no permission bits.
func (f *FS) Chmod(name string, mode hackpadfs.FileMode) error {
	parts, err := split("chmod", name)
	if err != nil {
		return err
	}
	if _, err := f.lookup(parts); err != nil {
		return &hackpadfs.PathError{Op: "chmod", Path: name, Err: err}
	}
	return nil
}

// Chtimes is not supported by OPFS; it reports ErrNotExist for a missing
// name and ErrNotImplemented otherwise.
func (f *FS) Chtimes(name string, atime, mtime time.Time) error {
	parts, err := split("chtimes", name)
	if err != nil {
		return err
	}
	if _, err := f.lookup(parts); err != nil {
		return &hackpadfs.PathError{Op: "chtimes", Path: name, Err: err}
	}
	return &hackpadfs.PathError{Op: "chtimes", Path: name, Err: hackpadfs.ErrNotImplemented}
}

type fileInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i *fileInfo) Name() string { return i.name }
func (i *fileInfo) Size() int64  { return i.size }
func (i *fileInfo) Mode() hackpadfs.FileMode {
	if i.dir {
		return hackpadfs.ModeDir | 0o777
	}
	return 0o666
}
func (i *fileInfo) ModTime() time.Time { return i.mod }
func (i *fileInfo) IsDir() bool        { return i.dir }
func (i *fileInfo) Sys() any           { return nil }

type dirEntry struct {
	e rawEntry
}

func (d *dirEntry) Name() string { return d.e.name }
func (d *dirEntry) IsDir() bool  { return d.e.dir }
func (d *dirEntry) Type() hackpadfs.FileMode {
	if d.e.dir {
		return hackpadfs.ModeDir
	}
	return 0
}
func (d *dirEntry) Info() (hackpadfs.FileInfo, error) {
	fi, err := statEntry(d.e.name, d.e.h, d.e.dir)
	if err != nil {
		return nil, &hackpadfs.PathError{Op: "stat", Path: d.e.name, Err: err}
	}
	return fi, nil
}

// Estimate returns navigator.storage.estimate()'s usage and quota for the
// origin, in bytes. Quota minus usage is what downloads may still write;
// download.CheckSpace(opfs.Free) turns it into a pre-check.
func Estimate() (usage, quota int64, err error) {
	if !Available() {
		return 0, 0, ErrUnavailable
	}
	est, err := awaitCall(js.Global().Get("navigator").Get("storage"), "estimate")
	if err != nil {
		return 0, 0, err
	}
	return int64(est.Get("usage").Float()), int64(est.Get("quota").Float()), nil
}

// Free returns quota minus usage from Estimate.
func Free() (int64, error) {
	usage, quota, err := Estimate()
	if err != nil {
		return 0, err
	}
	return max(quota-usage, 0), nil
}

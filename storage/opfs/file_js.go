//go:build js

package opfs

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"syscall/js"

	"github.com/hack-pad/hackpadfs"
)

// chunk bounds the JS staging buffer used to copy between Go memory and a
// sync access handle.
const chunk = 4 << 20

var uint8Array = js.Global().Get("Uint8Array")

// shared is one FileSystemSyncAccessHandle used by every File open on the
// same OPFS path in this instance (OPFS allows only one per file).
type shared struct {
	h       js.Value
	refs    int
	scratch js.Value // reusable Uint8Array, grown on demand
	scrLen  int
	mu      sync.Mutex // guards scratch
}

// acquire returns the shared handle for key, creating it on first use.
// Callers hold mu.
func acquire(key string, fh js.Value) (*shared, error) {
	if s := handles[key]; s != nil {
		s.refs++
		return s, nil
	}
	if fh.Get("createSyncAccessHandle").Type() != js.TypeFunction {
		return nil, ErrNoSyncAccess
	}
	h, err := awaitCall(fh, "createSyncAccessHandle")
	if err != nil {
		return nil, err
	}
	s := &shared{h: h, refs: 1}
	handles[key] = s
	return s, nil
}

// releaseLocked drops one reference; callers hold mu.
func releaseLocked(key string, s *shared) error {
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(handles, key)
	_, err := call(s.h, "close")
	return err
}

// buf returns a JS staging view of n bytes; callers hold s.mu.
func (s *shared) buf(n int) js.Value {
	if s.scrLen < n {
		size := max(n, min(2*s.scrLen, chunk))
		s.scratch = uint8Array.New(size)
		s.scrLen = size
	}
	return s.scratch.Call("subarray", 0, n)
}

func (s *shared) size() (int64, error) {
	v, err := call(s.h, "getSize")
	if err != nil {
		return 0, err
	}
	return int64(v.Float()), nil
}

func (s *shared) readAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(p) {
		c := min(len(p)-n, chunk)
		view := s.buf(c)
		v, err := call(s.h, "read", view, map[string]any{"at": float64(off + int64(n))})
		if err != nil {
			return n, err
		}
		got := v.Int()
		if got > 0 {
			js.CopyBytesToGo(p[n:n+got], view.Call("subarray", 0, got))
		}
		n += got
		if got < c {
			return n, io.EOF
		}
	}
	return n, nil
}

func (s *shared) writeAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(p) {
		c := min(len(p)-n, chunk)
		view := s.buf(c)
		js.CopyBytesToJS(view, p[n:n+c])
		v, err := call(s.h, "write", view, map[string]any{"at": float64(off + int64(n))})
		if err != nil {
			return n, err
		}
		got := v.Int()
		n += got
		if got < c {
			return n, io.ErrShortWrite
		}
	}
	return n, nil
}

// file is an open OPFS file or directory.
type file struct {
	fs   *FS
	name string // as passed to OpenFile, for errors

	mu     sync.Mutex
	closed bool

	// Regular files.
	key  string
	fh   js.Value // FileSystemFileHandle
	sh   *shared
	flag int
	off  int64

	// Directories.
	isDir   bool
	dir     js.Value
	entries []hackpadfs.DirEntry
	listed  bool
}

var errNegativeOffset = errors.New("negative offset")

func (f *file) err(op string, err error) error {
	return &hackpadfs.PathError{Op: op, Path: f.name, Err: err}
}

func (f *file) readable() bool { return f.flag&hackpadfs.FlagWriteOnly == 0 }
func (f *file) writable() bool {
	return f.flag&(hackpadfs.FlagWriteOnly|hackpadfs.FlagReadWrite) != 0
}

// check validates an I/O call; callers hold f.mu.
func (f *file) check(op string, write bool) error {
	switch {
	case f.closed:
		return f.err(op, hackpadfs.ErrClosed)
	case f.isDir:
		return f.err(op, hackpadfs.ErrIsDir)
	case write && !f.writable(), !write && !f.readable():
		return f.err(op, syscall.EBADF)
	}
	return nil
}

func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := f.sh.readAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF {
		if n > 0 {
			return n, nil
		}
		return 0, io.EOF
	}
	if err != nil {
		return n, f.err("read", err)
	}
	return n, nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("readat", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("readat", errNegativeOffset)
	}
	n, err := f.sh.readAt(p, off)
	if err != nil && err != io.EOF {
		err = f.err("readat", err)
	}
	return n, err
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&hackpadfs.FlagAppend != 0 {
		size, err := f.sh.size()
		if err != nil {
			return 0, f.err("write", err)
		}
		f.off = size
	}
	n, err := f.sh.writeAt(p, f.off)
	f.off += int64(n)
	if err != nil {
		return n, f.err("write", err)
	}
	return n, nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("writeat", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("writeat", errNegativeOffset)
	}
	if f.flag&hackpadfs.FlagAppend != 0 {
		return 0, f.err("writeat", errors.New("os: invalid use of WriteAt on file opened with O_APPEND"))
	}
	n, err := f.sh.writeAt(p, off)
	if err != nil {
		return n, f.err("writeat", err)
	}
	return n, nil
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, f.err("seek", hackpadfs.ErrClosed)
	}
	if f.isDir {
		return 0, f.err("seek", hackpadfs.ErrIsDir)
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.off
	case io.SeekEnd:
		size, err := f.sh.size()
		if err != nil {
			return 0, f.err("seek", err)
		}
		base = size
	default:
		return 0, f.err("seek", hackpadfs.ErrInvalid)
	}
	if base+offset < 0 {
		return 0, f.err("seek", hackpadfs.ErrInvalid)
	}
	f.off = base + offset
	return f.off, nil
}

func (f *file) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return f.err("truncate", hackpadfs.ErrInvalid)
	}
	if _, err := call(f.sh.h, "truncate", float64(size)); err != nil {
		return f.err("truncate", err)
	}
	return nil
}

func (f *file) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.err("sync", hackpadfs.ErrClosed)
	}
	if f.isDir {
		return nil
	}
	if _, err := call(f.sh.h, "flush"); err != nil {
		return f.err("sync", err)
	}
	return nil
}

func (f *file) Stat() (hackpadfs.FileInfo, error) {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, f.err("stat", hackpadfs.ErrClosed)
	}
	base := f.name
	if i := lastSlash(base); i >= 0 {
		base = base[i+1:]
	}
	if f.isDir {
		return &fileInfo{name: base, dir: true}, nil
	}
	fi, err := statEntry(base, f.fh, false)
	if err != nil {
		return nil, f.err("stat", err)
	}
	// The handle's size is authoritative for this instance's writes.
	if size, err := f.sh.size(); err == nil {
		fi.size = size
	}
	return fi, nil
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

func (f *file) ReadDir(n int) ([]hackpadfs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, f.err("readdir", hackpadfs.ErrClosed)
	}
	if !f.isDir {
		return nil, f.err("readdir", hackpadfs.ErrNotDir)
	}
	if !f.listed {
		entries, err := readDirEntries(f.dir)
		if err != nil {
			return nil, f.err("readdir", err)
		}
		f.entries, f.listed = entries, true
	}
	if n <= 0 {
		out := f.entries
		f.entries = nil
		return out, nil
	}
	if len(f.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(f.entries))
	out := f.entries[:n:n]
	f.entries = f.entries[n:]
	return out, nil
}

func (f *file) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.err("close", hackpadfs.ErrClosed)
	}
	f.closed = true
	if f.isDir {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	if err := releaseLocked(f.key, f.sh); err != nil {
		return f.err("close", err)
	}
	return nil
}

//go:build js

package opfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/hack-pad/hackpadfs"
	"github.com/hack-pad/hackpadfs/fstest"
)

var testDirs atomic.Int64

// newTestFS returns an FS in a fresh OPFS directory removed at cleanup.
func newTestFS(tb testing.TB) *FS {
	tb.Helper()
	dir := fmt.Sprintf("opfstest/%d", testDirs.Add(1))
	fsys, err := New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if top, err := New("opfstest"); err == nil {
			top.RemoveAll(dir[len("opfstest/"):])
		}
	})
	return fsys
}

func TestConformance(t *testing.T) {
	options := fstest.FSOptions{
		Name: "opfs",
		TestFS: func(tb testing.TB) fstest.SetupFS {
			return newTestFS(tb)
		},
	}
	data := fstest.FS(t, options)
	for _, s := range data.Skips {
		t.Logf("fstest skipped: %s", s.Name)
	}
	data = fstest.File(t, options)
	for _, s := range data.Skips {
		t.Logf("fstest skipped: %s", s.Name)
	}
}

func TestLargeReadWrite(t *testing.T) {
	fsys := newTestFS(t)
	want := make([]byte, 2*chunk+12345)
	for i := range want {
		want[i] = byte(i * 7)
	}
	f, err := fsys.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.(io.Writer).Write(want); err != nil || n != len(want) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := hackpadfs.ReadFile(fsys, "big")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read back differs")
	}
	r, err := fsys.Open("big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	part := make([]byte, chunk+10)
	n, err := r.(io.ReaderAt).ReadAt(part, chunk-5)
	if err != nil || n != len(part) || !bytes.Equal(part, want[chunk-5:2*chunk+5]) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
}

func TestSharedHandleAndLock(t *testing.T) {
	fsys := newTestFS(t)
	if err := hackpadfs.WriteFullFile(fsys, "a", []byte("hello"), 0o666); err != nil {
		t.Fatal(err)
	}
	r1, err := fsys.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := fsys.OpenFile("a", hackpadfs.FlagReadWrite, 0)
	if err != nil {
		t.Fatalf("second open of the same file: %v", err)
	}
	if err := fsys.Remove("a"); !errors.Is(err, ErrLocked) {
		t.Errorf("Remove of open file = %v, want ErrLocked", err)
	}
	if err := fsys.Rename("a", "b"); !errors.Is(err, ErrLocked) {
		t.Errorf("Rename of open file = %v, want ErrLocked", err)
	}
	r1.Close()
	r2.Close()
	if err := fsys.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("a"); !errors.Is(err, hackpadfs.ErrNotExist) {
		t.Errorf("Stat(a) after rename = %v", err)
	}
}

func TestRenameDirTree(t *testing.T) {
	fsys := newTestFS(t)
	if err := fsys.MkdirAll("d/e/f", 0o777); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"d/x", "d/e/y", "d/e/f/z"} {
		if err := hackpadfs.WriteFullFile(fsys, name, []byte(name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Rename("d", "n"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"n/x", "n/e/y", "n/e/f/z"} {
		b, err := hackpadfs.ReadFile(fsys, name)
		if err != nil || string(b) != "d"+name[1:] {
			t.Errorf("ReadFile(%s) = %q, %v", name, b, err)
		}
	}
	if _, err := fsys.Stat("d"); !errors.Is(err, hackpadfs.ErrNotExist) {
		t.Errorf("Stat(d) after rename = %v", err)
	}
	if err := fsys.Rename("n", "n/e/inside"); !errors.Is(err, hackpadfs.ErrInvalid) {
		t.Errorf("Rename into itself = %v, want ErrInvalid", err)
	}
}

// Run: go build -o /tmp/wasmworker ./e2e/wasmtest/cmd/wasmworker &&
// GOOS=js GOARCH=wasm go test -exec=/tmp/wasmworker -run=NONE -bench=. ./storage/opfs/
func BenchmarkWrite(b *testing.B) {
	fsys := newTestFS(b)
	f, err := fsys.Create("w")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	for i := 0; b.Loop(); i++ {
		if _, err := f.(io.WriterAt).WriteAt(buf, int64(i%64)*int64(len(buf))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadAt(b *testing.B) {
	fsys := newTestFS(b)
	const size = 64 << 20
	if err := hackpadfs.WriteFullFile(fsys, "r", make([]byte, size), 0o666); err != nil {
		b.Fatal(err)
	}
	f, err := fsys.Open("r")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 16<<20)
	b.SetBytes(int64(len(buf)))
	for i := 0; b.Loop(); i++ {
		if _, err := f.(io.ReaderAt).ReadAt(buf, int64(i%4)*int64(len(buf))); err != nil {
			b.Fatal(err)
		}
	}
}

// Package opfs implements a hackpadfs file system on the browser's Origin
// Private File System (OPFS), for GOOS=js builds.
//
// Directories are FileSystemDirectoryHandles; file contents are read and
// written through FileSystemSyncAccessHandles, which browsers only expose
// inside dedicated Workers. The engine runs in a Worker, so that is where
// this package must be used: on a page's main thread OpenFile fails with
// ErrNoSyncAccess.
//
// Contract and deviations from an OS file system (measured in Chromium):
//
//   - Every call may wait on JS promises. It must be made from an ordinary
//     goroutine, never from inside a js.Func callback (the callback blocks the
//     event loop that would resolve the promise, so it would deadlock).
//   - A sync access handle is exclusive per file across the whole origin. This
//     package shares one handle among all Files opened on the same path in
//     this Wasm instance (reference counted, closed with the last File), so
//     opening a file several times works; another Worker or tab holding the
//     file makes OpenFile fail with ErrLocked.
//   - Remove, RemoveAll and Rename of a file that is open fail with ErrLocked
//     (OPFS refuses to touch locked entries) instead of unlinking it.
//   - OPFS has no permission bits or settable times: files report mode 0o666,
//     directories ModeDir|0o777; Chmod only checks that the path exists;
//     Chtimes returns ErrNotImplemented. ModTime of a file is the browser's
//     lastModified; directories report the zero time.
//   - Renaming a directory copies its tree and removes the old one, because
//     Chromium has no FileSystemDirectoryHandle.move; it is not atomic.
//   - Writes that exceed the origin's quota fail with an error matching
//     ErrQuota.
//
// The hackpadfs conformance suite (hackpadfs/fstest, FS and File) passes in
// headless Chromium; run it with `go test ./storage/opfs/` natively (it
// builds the GOOS=js test binary and runs it in a Worker via e2e/wasmtest).
package opfs

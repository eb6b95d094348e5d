package opfs

import "errors"

// Errors specific to OPFS; they are wrapped in *hackpadfs.PathError or
// *hackpadfs.LinkError, so test them with errors.Is.
var (
	// ErrUnavailable: the JS environment has no navigator.storage.getDirectory.
	ErrUnavailable = errors.New("opfs: navigator.storage.getDirectory is not available in this JS context")
	// ErrNoSyncAccess: FileSystemFileHandle.createSyncAccessHandle is missing,
	// which is the case everywhere except inside a dedicated Worker.
	ErrNoSyncAccess = errors.New("opfs: sync access handles are unavailable (OPFS file I/O works only inside a dedicated Worker)")
	// ErrLocked: another Worker or tab holds an access handle on the file, or
	// the entry is open in this instance and cannot be moved or removed.
	ErrLocked = errors.New("opfs: file is locked by an open access handle")
	// ErrQuota: the origin's storage quota is exhausted.
	ErrQuota = errors.New("opfs: storage quota exceeded")
)

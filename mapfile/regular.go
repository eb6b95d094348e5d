package mapfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// NotRegularError reports a path that names something other than a regular
// file (a FIFO, a device, a socket, a directory) where a file is read.
// Opening a FIFO would block until a writer comes, and a device may never
// end, so such paths are refused before they are opened.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	what := "not a regular file"
	switch t := e.Mode.Type(); {
	case t&fs.ModeDir != 0:
		what = "a directory, not a file"
	case t&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO), not a regular file"
	case t&fs.ModeSocket != 0:
		what = "a socket, not a regular file"
	case t&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		what = "a device, not a regular file"
	}
	return fmt.Sprintf("%s: %s", e.Path, what)
}

// OpenRegular opens path for reading if it is a regular file (following
// symbolic links) and returns a *NotRegularError otherwise, without
// blocking on a FIFO: the path is checked before it is opened, opened
// without waiting for a writer where the platform allows, and checked again
// through the descriptor.
func OpenRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	fd, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	if st, err = fd.Stat(); err != nil || !st.Mode().IsRegular() {
		fd.Close()
		if err != nil {
			return nil, err
		}
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return fd, nil
}

// ReadFile is os.ReadFile for regular files only (see OpenRegular).
func ReadFile(path string) ([]byte, error) {
	fd, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	return io.ReadAll(fd)
}

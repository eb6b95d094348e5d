//go:build unix

package storage

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FreeSpace reports the bytes available to an unprivileged user on the file
// system holding dir.
func FreeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("storage: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

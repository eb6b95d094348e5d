package mapfile

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
)

// SHA256 streams the regular file at path (see OpenRegular) and returns its
// SHA-256 in hex and its size.
func SHA256(path string) (sum string, size int64, err error) {
	f, err := OpenRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

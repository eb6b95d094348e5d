package download

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// sidecarVersion is bumped whenever the sidecar's meaning changes; an
// unknown version makes the partial download start over.
const sidecarVersion = 1

// maxSidecar bounds what parseSidecar accepts; real sidecars are a few
// hundred bytes.
const maxSidecar = 64 << 10

// sidecar records a partial download next to <dst>.part so an interrupted
// download can resume. Done counts bytes that were synced to the part file
// before the sidecar was written.
type sidecar struct {
	Version   int    `json:"version"`
	URL       string `json:"url"`
	Size      int64  `json:"size"`                // expected total size, -1 when unknown
	Validator string `json:"validator,omitempty"` // strong ETag or Last-Modified, sent as If-Range
	SHA256    string `json:"sha256,omitempty"`    // expected digest (caller's or the server's), lowercase hex
	Done      int64  `json:"done"`
}

func (s *sidecar) marshal() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		// Only strings and integers: cannot fail.
		panic(err)
	}
	return b
}

// parseSidecar decodes and validates a sidecar. Anything it rejects makes
// the caller discard the partial download, so it is strict.
func parseSidecar(b []byte) (*sidecar, error) {
	if len(b) > maxSidecar {
		return nil, fmt.Errorf("sidecar: %d bytes, limit %d", len(b), maxSidecar)
	}
	var s sidecar
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	if dec.More() {
		return nil, errors.New("sidecar: trailing data after JSON object")
	}
	switch {
	case s.Version != sidecarVersion:
		return nil, fmt.Errorf("sidecar: version %d, want %d", s.Version, sidecarVersion)
	case s.URL == "":
		return nil, errors.New("sidecar: empty url")
	case s.Size < -1:
		return nil, fmt.Errorf("sidecar: size %d", s.Size)
	case s.Done < 0:
		return nil, fmt.Errorf("sidecar: done %d", s.Done)
	case s.Size >= 0 && s.Done > s.Size:
		return nil, fmt.Errorf("sidecar: done %d beyond size %d", s.Done, s.Size)
	case s.SHA256 != "" && !isSHA256Hex(s.SHA256):
		return nil, fmt.Errorf("sidecar: sha256 %q is not 64 lowercase hex digits", s.SHA256)
	}
	return &s, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

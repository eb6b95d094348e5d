// Package resolve turns what a user typed after -m into a model on disk:
// an existing path is used as it is; a name is looked up in the local cache,
// then in the Resolver's Path directories, then fetched from the Hugging
// Face hub into the cache (resumable, verified, with progress). It reads no
// environment: the program fills a Resolver (cmd/native from CORTIQ_CACHE
// and CORTIQ_MODEL_PATH).
//
// A name is a known short name (Known), a plain name (letters, digits, '_',
// '.', '-') or a hub reference owner/repo/path/to/file.gguf checked against
// the hub's grammar (ParseHubRef); anything else is refused with
// ErrInvalidName before a path is built from it, and a download's
// destination must stay inside the cache with symbolic links followed, so
// no front end (CLI -m, websocket load) can write elsewhere. A file in the
// download cache that fails the structural check (Check) is moved aside
// and fetched again.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HubFile names one file of a Hugging Face repository.
type HubFile struct {
	Repo     string // "ggml-org/models"
	File     string // "tinyllamas/stories260K.gguf"
	Revision string // "main" when empty
	SHA256   string // expected digest, when known
	Size     int64  // expected size in bytes, when known (0: unknown)
}

// Known maps the short names users type to their hub location. A digest is
// pinned where the hub file's sha256 is known for certain (the same bytes as
// ../shared/fixtures/models/stories260K.gguf); the others are checked by the
// hub's own sha256 header and structurally (Check).
var Known = map[string]HubFile{
	"stories260K": {Repo: "ggml-org/models", File: "tinyllamas/stories260K.gguf",
		SHA256: "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d", Size: 1185376},
	"stories15M": {Repo: "ggml-org/models", File: "tinyllamas/stories15M-q4_0.gguf"},
}

// DefaultModel is what `cortiq run` uses when -m is not given.
const DefaultModel = "stories260K"

// Downloader fetches a hub file to dst. Set by the program (the download
// package); nil means no network access is configured. It must verify the
// bytes (f.SHA256 when set, else the hub's digest and Check(f.File)) before
// dst appears, and never leave an unverified dst.
type Downloader func(ctx context.Context, f HubFile, dst string) error

// Resolver finds models. The zero Resolver resolves paths only: no cache,
// no search path, no downloads.
type Resolver struct {
	CacheDir string   // where downloads and conversions live ("" = none)
	Path     []string // directories searched by name after the cache
	Download Downloader
}

// ErrNotFound is returned (wrapped) when a name cannot be resolved.
var ErrNotFound = errors.New("model not found")

// ErrInvalidName is returned (wrapped) for a model name that is neither an
// existing path, a known short name, a valid plain name nor a valid hub
// reference (owner/repo/path/to/file.gguf); such a name is never used to
// build a path, so nothing is read or written outside the cache.
var ErrInvalidName = errors.New("invalid model name")

// Resolve returns a path for nameOrPath.
func (r *Resolver) Resolve(ctx context.Context, nameOrPath string) (string, error) {
	if nameOrPath == "" {
		nameOrPath = DefaultModel
	}
	if _, err := os.Stat(nameOrPath); err == nil {
		return nameOrPath, nil
	}
	hf, known := Known[nameOrPath]
	switch {
	case known:
	case looksLikeHubRef(nameOrPath):
		var err error
		if hf, err = ParseHubRef(nameOrPath); err != nil {
			return "", fmt.Errorf("resolve: %w", err)
		}
		known = true
	case strings.ContainsAny(nameOrPath, `/\`):
		return "", fmt.Errorf("resolve: %s: no such file or directory", nameOrPath)
	default:
		if err := validPlainName(nameOrPath); err != nil {
			return "", fmt.Errorf("resolve: %w", err)
		}
	}
	var tried []string
	look := func(dir string, cache bool) (string, bool) {
		for _, cand := range candidates(dir, nameOrPath) {
			tried = append(tried, cand)
			if _, err := os.Stat(cand); err == nil {
				if filepath.Base(cand) == "config.json" {
					return filepath.Dir(cand), true
				}
				if cache {
					// Our own download cache: a copy left corrupt by an
					// older version or a damaged disk is moved aside
					// (nothing is deleted) and fetched again rather
					// than trusted.
					if err := checkCached(cand, hf); err != nil {
						aside := cand + ".corrupt"
						if os.Rename(cand, aside) != nil {
							return "", false
						}
						tried = append(tried[:len(tried)-1], cand+" (damaged, moved to "+aside+": "+err.Error()+")")
						continue
					}
				}
				return cand, true
			}
		}
		return "", false
	}
	if p, ok := look(filepath.Join(r.CacheDir, "models"), true); ok {
		return p, nil
	}
	for _, d := range r.Path {
		if p, ok := look(d, false); ok {
			return p, nil
		}
	}
	if !known {
		return "", fmt.Errorf("resolve: %q: %w (looked in %s; not a known hub name)", nameOrPath, ErrNotFound, strings.Join(tried, ", "))
	}
	root := filepath.Join(r.CacheDir, "models")
	dst := filepath.Join(root, nameOrPath+filepath.Ext(hf.File))
	if err := inside(root, dst); err != nil {
		return "", fmt.Errorf("resolve: %q: %w", nameOrPath, err)
	}
	if r.Download == nil {
		return "", fmt.Errorf("resolve: %q: %w locally (looked in %s) and no downloader is configured", nameOrPath, ErrNotFound, strings.Join(tried, ", "))
	}
	made, err := mkdirInside(root, filepath.Dir(dst))
	if err != nil {
		return "", fmt.Errorf("resolve: %q: %w", nameOrPath, err)
	}
	if err := r.Download(ctx, hf, dst); err != nil {
		// Leave no empty directories behind (a kept partial download
		// keeps its own).
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
		return "", fmt.Errorf("resolve: %q: %w: no local copy (looked in %s) and the download of %s/%s failed: %w", nameOrPath, ErrNotFound, strings.Join(tried, ", "), hf.Repo, hf.File, err)
	}
	return dst, nil
}

// missingDirs lists dir and those of its parents that do not exist yet,
// outermost first.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		out = append([]string{d}, out...)
		if filepath.Dir(d) == d {
			break
		}
	}
	return out
}

func looksLikeHubRef(s string) bool {
	if filepath.IsAbs(s) || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") {
		return false
	}
	parts := strings.Split(s, "/")
	return len(parts) >= 3 && (strings.HasSuffix(s, ".gguf") || strings.HasSuffix(s, ".cmf"))
}

// ParseHubRef splits "owner/repo/path/to/file.gguf" into a HubFile after
// checking it against the hub's grammar: owner and repo are 1 to 96 ASCII
// letters, digits, '_', '.' or '-', starting and ending with a letter, digit
// or '_', without "--" or ".."; the file path is slash-separated segments,
// none empty, "." or "..", with no backslash, colon or control character.
func ParseHubRef(ref string) (HubFile, error) {
	bad := func(why string) (HubFile, error) {
		return HubFile{}, fmt.Errorf("%w %q: %s (want owner/repo/path/to/file.gguf)", ErrInvalidName, ref, why)
	}
	if len(ref) > 1024 {
		return bad("longer than 1024 bytes")
	}
	parts := strings.SplitN(ref, "/", 3)
	if len(parts) != 3 {
		return bad("not owner/repo/file")
	}
	for _, p := range parts[:2] {
		if err := validRepoPart(p); err != "" {
			return bad(err)
		}
	}
	for _, seg := range strings.Split(parts[2], "/") {
		switch {
		case seg == "":
			return bad("empty path segment")
		case seg == "." || seg == "..":
			return bad(fmt.Sprintf("path segment %q", seg))
		}
		for _, c := range seg {
			if c < 0x20 || c == 0x7f || c == '\\' || c == ':' {
				return bad(fmt.Sprintf("character %q in the file name", c))
			}
		}
	}
	return HubFile{Repo: parts[0] + "/" + parts[1], File: parts[2]}, nil
}

func validRepoPart(p string) string {
	if p == "" || len(p) > 96 {
		return fmt.Sprintf("owner or repo name %q is empty or longer than 96 bytes", p)
	}
	word := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !word(c) && c != '.' && c != '-' {
			return fmt.Sprintf("character %q in owner or repo name %q", c, p)
		}
	}
	if !word(p[0]) || !word(p[len(p)-1]) || strings.Contains(p, "--") || strings.Contains(p, "..") {
		return fmt.Sprintf("owner or repo name %q", p)
	}
	return ""
}

// validPlainName accepts a name without separators that can only name a
// file or directory inside the directories searched.
func validPlainName(s string) error {
	if len(s) > 255 || strings.Contains(s, "..") || validRepoPart(s) != "" {
		return fmt.Errorf("%w %q: a name is letters, digits, '_', '.' and '-' (or give a path, or owner/repo/file.gguf)", ErrInvalidName, s)
	}
	return nil
}

// inside checks lexically that p lies under root.
func inside(root, p string) error {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return fmt.Errorf("%w: %s is outside the cache %s", ErrInvalidName, p, root)
	}
	return nil
}

// mkdirInside creates dir (under root) after checking that its deepest
// existing ancestor, symbolic links followed, lies under root: a link in
// the cache pointing elsewhere never gets a directory or file created
// through it.
func mkdirInside(root, dir string) (made []string, err error) {
	pre := missingDirs(root) // the cache itself may be new too
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	defer func() { made = append(pre, made...) }()
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	check := func(p string) error {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if err := inside(realRoot, real); err != nil {
			return fmt.Errorf("%w: %s leads to %s, outside the cache %s", ErrInvalidName, p, real, realRoot)
		}
		return nil
	}
	a := dir
	for {
		if _, err := os.Lstat(a); err == nil || len(a) <= len(root) {
			break
		}
		made = append([]string{a}, made...)
		a = filepath.Dir(a)
	}
	if err := check(a); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return made, check(dir)
}

func candidates(dir, name string) []string {
	base := filepath.Join(dir, name)
	return []string{base + ".cmf", base + ".gguf", filepath.Join(base, "config.json"), base}
}

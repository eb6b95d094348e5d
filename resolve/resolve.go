// Package resolve turns what a user typed after -m into a model on disk:
// an existing path is used as it is; a name is looked up in the local cache,
// then in the Resolver's Path directories, then fetched from the Hugging
// Face hub into the cache (resumable, verified, with progress). It reads no
// environment: the program fills a Resolver (cmd/native from CORTIQ_CACHE
// and CORTIQ_MODEL_PATH).
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
}

// Known maps the short names users type to their hub location.
var Known = map[string]HubFile{
	"stories260K": {Repo: "ggml-org/models", File: "tinyllamas/stories260K.gguf"},
	"stories15M":  {Repo: "ggml-org/models", File: "tinyllamas/stories15M-q4_0.gguf"},
}

// DefaultModel is what `cortiq run` uses when -m is not given.
const DefaultModel = "stories260K"

// Downloader fetches a hub file to dst. Set by the program (the download
// package); nil means no network access is configured.
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

// Resolve returns a path for nameOrPath.
func (r *Resolver) Resolve(ctx context.Context, nameOrPath string) (string, error) {
	if nameOrPath == "" {
		nameOrPath = DefaultModel
	}
	if _, err := os.Stat(nameOrPath); err == nil {
		return nameOrPath, nil
	}
	if strings.ContainsAny(nameOrPath, `/\`) && !looksLikeHubRef(nameOrPath) {
		return "", fmt.Errorf("resolve: %s: no such file or directory", nameOrPath)
	}
	var tried []string
	look := func(dir string) (string, bool) {
		for _, cand := range candidates(dir, nameOrPath) {
			tried = append(tried, cand)
			if _, err := os.Stat(cand); err == nil {
				if filepath.Base(cand) == "config.json" {
					return filepath.Dir(cand), true
				}
				return cand, true
			}
		}
		return "", false
	}
	if p, ok := look(filepath.Join(r.CacheDir, "models")); ok {
		return p, nil
	}
	for _, d := range r.Path {
		if p, ok := look(d); ok {
			return p, nil
		}
	}
	hf, known := Known[nameOrPath]
	if !known && looksLikeHubRef(nameOrPath) {
		// owner/repo/path/to/file.gguf
		parts := strings.SplitN(nameOrPath, "/", 3)
		hf = HubFile{Repo: parts[0] + "/" + parts[1], File: parts[2]}
		known = true
	}
	if !known {
		return "", fmt.Errorf("resolve: %q: %w (looked in %s; not a known hub name)", nameOrPath, ErrNotFound, strings.Join(tried, ", "))
	}
	dst := filepath.Join(r.CacheDir, "models", nameOrPath+filepath.Ext(hf.File))
	if r.Download == nil {
		return "", fmt.Errorf("resolve: %q: %w locally (looked in %s) and no downloader is configured", nameOrPath, ErrNotFound, strings.Join(tried, ", "))
	}
	created := missingDirs(filepath.Dir(dst))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("resolve: %w", err)
	}
	if err := r.Download(ctx, hf, dst); err != nil {
		// A failed lookup leaves no empty folders behind (a partial
		// download, kept for resume, keeps its folder).
		for i := len(created) - 1; i >= 0; i-- {
			os.Remove(created[i])
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
	if filepath.IsAbs(s) || strings.HasPrefix(s, ".") {
		return false
	}
	parts := strings.Split(s, "/")
	return len(parts) >= 3 && (strings.HasSuffix(s, ".gguf") || strings.HasSuffix(s, ".cmf"))
}

func candidates(dir, name string) []string {
	base := filepath.Join(dir, name)
	return []string{base + ".cmf", base + ".gguf", filepath.Join(base, "config.json"), base}
}

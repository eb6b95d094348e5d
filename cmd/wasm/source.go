package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// A model source is what load() names: a bare name looked up on the serving
// origin (/models/<name>/, whose JSON listing names the files), a URL of a
// single GGUF or CMF file, or a URL of a Hugging Face style directory.
type sourceKind int

const (
	sourceName sourceKind = iota // bare name: /models/<name>/ listing
	sourceFile                   // URL of one .gguf / .cmf file
	sourceDir                    // URL of an HF directory (config.json + safetensors)
)

// source is a parsed load() argument.
type source struct {
	Kind sourceKind
	Spec string // as given
	Base string // absolute URL of the directory the files are fetched from (ends in "/")
	File string // sourceFile: the file's name under Base
	Key  string // OPFS directory under models/ that caches it
}

var bareName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// parseSource classifies spec; origin is the page's origin
// ("http://127.0.0.1:8080"), used for bare names and relative URLs.
func parseSource(spec, origin string) (source, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return source{}, errors.New("no model given: pass a name served under /models/ or a URL")
	}
	if bareName.MatchString(spec) && !strings.Contains(spec, "..") {
		return source{Kind: sourceName, Spec: spec, Base: strings.TrimSuffix(origin, "/") + "/models/" + spec + "/", Key: spec}, nil
	}
	o, err := url.Parse(origin)
	if err != nil {
		return source{}, fmt.Errorf("page origin %q: %w", origin, err)
	}
	u, err := o.Parse(spec)
	if err != nil {
		return source{}, fmt.Errorf("model URL %q: %w", spec, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return source{}, fmt.Errorf("model URL %q: only http(s) URLs or bare names can be loaded", spec)
	}
	u.Fragment = ""
	s := source{Spec: spec}
	ext := strings.ToLower(path.Ext(u.Path))
	switch {
	case ext == ".gguf" || ext == ".cmf":
		s.Kind = sourceFile
		s.File = path.Base(u.Path)
		dir := *u
		dir.Path = path.Dir(u.Path) + "/"
		dir.RawPath = ""
		dir.RawQuery = ""
		s.Base = dir.String()
	case path.Base(u.Path) == "config.json":
		s.Kind = sourceDir
		dir := *u
		dir.Path = path.Dir(u.Path) + "/"
		dir.RawPath = ""
		s.Base = dir.String()
	default:
		s.Kind = sourceDir
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
			u.RawPath = ""
		}
		s.Base = u.String()
	}
	s.Key = urlKey(s.Base + s.File)
	return s, nil
}

// urlKey names the cache directory of a URL: readable, and unique through
// a digest of the whole URL.
func urlKey(u string) string {
	sum := sha256.Sum256([]byte(u))
	p, _ := url.Parse(u)
	label := "model"
	if p != nil {
		parts := strings.FieldsFunc(p.Path, func(r rune) bool { return r == '/' })
		if len(parts) > 0 {
			label = parts[len(parts)-1]
		}
	}
	label = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, label)
	if len(label) > 48 {
		label = label[:48]
	}
	return "url-" + hex.EncodeToString(sum[:6]) + "-" + label
}

// remoteFile is one file of a model as the server lists it.
type remoteFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Optional files may be absent on the server (tokenizer extras of an HF
	// directory probed without a listing).
	Optional bool `json:"optional,omitempty"`
}

// listing is the JSON the server returns for /models/<name>/.
type listing struct {
	Files []remoteFile `json:"files"`
}

// hfFiles are the files of an HF checkpoint the importer reads; everything
// else a directory may hold (reference outputs, READMEs, other formats) is
// not downloaded.
var hfFiles = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"special_tokens_map.json", "chat_template.jinja", "chat_template.json", "model.safetensors.index.json"}

// pickFiles chooses what to download from a listing and which file to
// import: the single GGUF/CMF file, or "" for an HF directory.
func pickFiles(files []remoteFile) (want []remoteFile, entry string, err error) {
	var models []remoteFile
	hasConfig := false
	for _, f := range files {
		if !validRel(f.Name) {
			return nil, "", fmt.Errorf("listing names an unsafe path %q", f.Name)
		}
		if f.Size < 0 {
			return nil, "", fmt.Errorf("listing gives %q a negative size", f.Name)
		}
		switch strings.ToLower(path.Ext(f.Name)) {
		case ".gguf", ".cmf":
			models = append(models, f)
		}
		if f.Name == "config.json" {
			hasConfig = true
		}
	}
	if hasConfig {
		return hfFromListing(files)
	}
	switch len(models) {
	case 0:
		return nil, "", errors.New("the listing has no .gguf or .cmf file and no config.json")
	case 1:
		return models, models[0].Name, nil
	}
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	return nil, "", fmt.Errorf("the listing has several model files (%s): load one by URL", strings.Join(names, ", "))
}

func hfFromListing(files []remoteFile) ([]remoteFile, string, error) {
	var want []remoteFile
	hasST := false
	for _, f := range files {
		name := f.Name
		switch {
		case strings.Contains(name, "/"):
			continue
		case slices.Contains(hfFiles, name):
			want = append(want, f)
		case strings.HasSuffix(name, ".safetensors") && name != "reference.safetensors":
			want = append(want, f)
			hasST = true
		}
	}
	if !hasST {
		return nil, "", errors.New("the HF directory listing has config.json but no .safetensors file")
	}
	return want, "", nil
}

// hfShards lists the shard files a model.safetensors.index.json names.
func hfShards(index []byte) ([]string, error) {
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &ix); err != nil {
		return nil, fmt.Errorf("model.safetensors.index.json: %w", err)
	}
	if len(ix.WeightMap) == 0 {
		return nil, errors.New("model.safetensors.index.json: empty weight_map")
	}
	var shards []string
	for _, s := range ix.WeightMap {
		if !validRel(s) || strings.Contains(s, "/") {
			return nil, fmt.Errorf("model.safetensors.index.json: shard name %q must be a plain file name", s)
		}
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	return shards, nil
}

// validRel reports whether name is a clean relative slash path.
func validRel(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return false
	}
	for _, p := range strings.Split(name, "/") {
		if p == "" || p == "." || p == ".." {
			return false
		}
	}
	return true
}

// manifest records a completely downloaded, verified model in OPFS; its
// presence is what lets a later load skip the network.
type manifest struct {
	Version int          `json:"version"`
	Source  string       `json:"source"` // the load() argument
	Base    string       `json:"base"`
	Entry   string       `json:"entry"` // file to import, "" for an HF directory
	Files   []cachedFile `json:"files"`
}

type cachedFile struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256,omitempty"`
	Verified string `json:"verified"` // how the download was checked (download.Verification)
}

const manifestName = "cortiq-manifest.json"
const manifestVersion = 1

func parseManifest(b []byte) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestName, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", manifestName, m.Version, manifestVersion)
	}
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("%s: no files", manifestName)
	}
	for _, f := range m.Files {
		if !validRel(f.Name) || f.Size < 0 {
			return nil, fmt.Errorf("%s: bad entry %q", manifestName, f.Name)
		}
	}
	if m.Entry != "" && !validRel(m.Entry) {
		return nil, fmt.Errorf("%s: bad entry file %q", manifestName, m.Entry)
	}
	return &m, nil
}

// sameOrigin reports whether URL u is on origin (scheme://host[:port]): a
// bearer token of the page's own server goes nowhere else.
func sameOrigin(u, origin string) bool {
	a, err := url.Parse(u)
	if err != nil {
		return false
	}
	b, err := url.Parse(origin)
	if err != nil {
		return false
	}
	return a.Scheme != "" && a.Host != "" && strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

package main

import (
	"os"
	"path/filepath"

	"github.com/cortiq/cortiq/resolve"
)

// The CLI reads the environment here (and for flag defaults); the library
// packages take what it finds as options.
//
//	CORTIQ_CACHE        the cache: downloads (models/), HF conversions
//	                    (converted/), the speed probe's verdicts (probe.json);
//	                    default <user cache dir>/cortiq
//	CORTIQ_MODEL_PATH   directories searched for a model by name after the
//	                    cache, separated like PATH
//	CORTIQ_PROBE_CACHE  the verdict file instead of $CORTIQ_CACHE/probe.json
//	                    (0 or off: remember nothing)
//	CORTIQ_GPU          0 or 1: what --backend auto means (cpu or webgpu)
//	CORTIQ_PROBE        0: --backend auto keeps the device without timing it

// cacheDir is cortiq's cache directory, "" when there is none.
func cacheDir() string {
	if d := os.Getenv("CORTIQ_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "cortiq")
	}
	return ""
}

// modelPath lists the CORTIQ_MODEL_PATH directories.
func modelPath() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("CORTIQ_MODEL_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// newResolver is the resolver the environment describes, downloading from
// the hub.
func newResolver() *resolve.Resolver {
	return &resolve.Resolver{CacheDir: cacheDir(), Path: modelPath(), Download: hubDownloader()}
}

// probeCachePath is where --backend auto's verdicts are kept ("" = nowhere).
func probeCachePath() string {
	if p, ok := os.LookupEnv("CORTIQ_PROBE_CACHE"); ok {
		if p == "0" || p == "off" {
			return ""
		}
		return p
	}
	if d := cacheDir(); d != "" {
		return filepath.Join(d, "probe.json")
	}
	return ""
}

// autoFromEnv is the backend CORTIQ_GPU makes of --backend auto: 0 the
// CPU, 1 the device (forced, as --backend webgpu).
func autoFromEnv(backend string) string {
	if backend == "auto" {
		switch os.Getenv("CORTIQ_GPU") {
		case "0":
			return "cpu"
		case "1":
			return "webgpu"
		}
	}
	return backend
}

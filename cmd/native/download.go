package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/storage"
	"github.com/cortiq/cortiq/storage/download"
	"github.com/cortiq/cortiq/storage/progress"
)

// hubDownloader fetches hub files into the cache with resume, verification
// and a progress bar on stderr.
func hubDownloader() resolve.Downloader {
	return func(ctx context.Context, f resolve.HubFile, dst string) error {
		fsys, err := storage.Dir(filepath.Dir(dst))
		if err != nil {
			return err
		}
		url := download.HFResolveURL(f.Repo, f.File, f.Revision)
		bar := progress.New(os.Stderr, filepath.Base(f.File))
		res, err := download.Fetch(ctx, fsys, url, filepath.Base(dst), download.Options{
			SHA256:   f.SHA256,
			Size:     f.Size,
			Check:    resolve.Check(f.File),
			Header:   download.HFHeader(),
			Progress: func(p download.Progress) { bar.Update(p.Done, p.Total, p.Rate) },
			Quota:    download.CheckSpace(func() (int64, error) { return storage.FreeSpace(filepath.Dir(dst)) }),
			Retries:  3,
		})
		if err != nil {
			return err
		}
		bar.Finish()
		if !res.Cached {
			fmt.Fprintf(os.Stderr, "downloaded %s (%d bytes, verified by %s)\n", dst, res.Size, res.Verified)
		}
		return nil
	}
}

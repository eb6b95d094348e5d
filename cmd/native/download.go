package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/storage"
	"github.com/cortiq/cortiq/storage/download"
	"github.com/cortiq/cortiq/storage/progress"
)

// hubDownloader fetches hub files into the cache with resume, verification
// (pinned sha256, the hub's sha256, else a structural check), timeouts and a
// progress bar on stderr.
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
			Progress: func(p download.Progress) { bar.UpdateStalled(p.Done, p.Total, p.Rate, p.Stalled) },
			Quota:    download.CheckSpace(func() (int64, error) { return storage.FreeSpace(filepath.Dir(dst)) }),
			Retries:  3,
		})
		if err != nil {
			bar.Stop()
			var he *download.HTTPError
			if errors.As(err, &he) && (he.StatusCode == 401 || he.StatusCode == 403) {
				if os.Getenv(download.HFTokenEnv) == "" {
					return fmt.Errorf("%w; set %s to a Hugging Face access token that can read %s", err, download.HFTokenEnv, f.Repo)
				}
				return fmt.Errorf("%w; the token in %s was refused for %s", err, download.HFTokenEnv, f.Repo)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%w (the partial download is kept; run again to resume)", err)
			}
			return err
		}
		bar.Finish()
		if !res.Cached {
			fmt.Fprintf(os.Stderr, "downloaded %s (%d bytes, verified by %s)\n", dst, res.Size, res.Verified)
		}
		return nil
	}
}

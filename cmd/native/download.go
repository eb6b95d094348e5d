package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/storage"
	"github.com/cortiq/cortiq/storage/download"
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
		hub := hub()
		url := hub.ResolveURL(f.Repo, f.File, f.Revision)
		fmt.Fprintf(os.Stderr, "cortiq: no local copy of %s; fetching %s/%s from the hub\n", filepath.Base(dst), f.Repo, f.File)
		if err := reachable(ctx, url); err != nil {
			return err
		}
		bar := newBar(os.Stderr, filepath.Base(f.File))
		res, err := download.Fetch(ctx, fsys, url, filepath.Base(dst), download.Options{
			SHA256:   f.SHA256,
			Size:     f.Size,
			Check:    resolve.Check(f.File),
			Header:   hub.Header(),
			Progress: func(p download.Progress) { bar.UpdateStalled(p.Done, p.Total, p.Rate, p.Stalled) },
			Quota:    download.CheckSpace(func() (int64, error) { return storage.FreeSpace(filepath.Dir(dst)) }),
			Retries:  3,
		})
		if err != nil {
			bar.Stop()
			var he *download.HTTPError
			if errors.As(err, &he) && (he.StatusCode == 401 || he.StatusCode == 403) {
				if hub.Token == "" {
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

// reachable fails fast when the hub (or the proxy in front of it) cannot
// be reached at all — no DNS answer, no route, a refused connection — so
// an offline machine gets one clear error at once rather than a download's
// retries.
func reachable(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	target := u
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err == nil && p != nil {
		target = p
	}
	port := target.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[target.Scheme]
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(target.Hostname(), port))
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return fmt.Errorf("cannot reach %s (offline? the name does not resolve): %w", target.Host, err)
		}
		return fmt.Errorf("cannot reach %s (offline?): %w", target.Host, err)
	}
	c.Close()
	return nil
}

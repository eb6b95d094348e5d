//go:build !js

package download_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/cortiq/cortiq/storage"
	"github.com/cortiq/cortiq/storage/download"
	"github.com/cortiq/cortiq/storage/progress"
)

// Fetching a Hugging Face file into the model cache with a terminal
// progress bar and a free-space pre-check.
func ExampleFetch() {
	dir, err := storage.DefaultDir()
	if err != nil {
		log.Fatal(err)
	}
	fsys, err := storage.Dir(dir)
	if err != nil {
		log.Fatal(err)
	}
	// The caller reads the environment; the package takes values.
	hub := download.Hub{Endpoint: os.Getenv(download.HFEndpointEnv), Token: os.Getenv(download.HFTokenEnv)}
	bar := progress.New(os.Stderr, "model.safetensors")
	res, err := download.Fetch(context.Background(), fsys,
		hub.ResolveURL("org/model", "model.safetensors", "main"),
		"hf/org/model/main/model.safetensors",
		download.Options{
			Header:   hub.Header(),
			Retries:  3,
			Progress: func(p download.Progress) { bar.UpdateStalled(p.Done, p.Total, p.Rate, p.Stalled) },
			Quota:    download.CheckSpace(func() (int64, error) { return storage.FreeSpace(dir) }),
		})
	bar.Finish()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Size, "bytes, verified by", res.Verified)
}

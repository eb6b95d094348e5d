package importer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestOpenCachedCancelled cancels an HF import with its CMF conversion at
// points spread over the whole run (digesting the sources, converting,
// checking the new entry): each stops with context.Canceled, leaves no
// cache entry or temporary file, and closes and unmaps every file it
// opened. A cancel while an existing entry is checked keeps the entry
// (it is not damaged, only unchecked).
func TestOpenCachedCancelled(t *testing.T) {
	dir := fixtures.Tiny(t, "llama")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("fixture %s not found: %v", dir, err)
	}
	cache := t.TempDir()
	converted := filepath.Join(cache, "converted")
	entries := func() []string {
		ents, _ := os.ReadDir(converted)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	fds, _ := fixtures.OpenFiles(t, dir)
	clean := func(what string) {
		t.Helper()
		n, mapped := fixtures.OpenFiles(t, dir)
		_, cached := fixtures.OpenFiles(t, cache)
		if n != fds || len(mapped)+len(cached) > 0 {
			t.Errorf("%s: %d open files (%d before), mapped %v %v", what, n, fds, mapped, cached)
		}
	}

	// How many checks a whole import and conversion makes.
	all := fixtures.CancelAfter(context.Background(), 1<<40)
	m, err := OpenCached(all, dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	total := all.Checks()
	if total < 20 {
		t.Fatalf("a whole import checked its context %d times", total)
	}
	if got := entries(); len(got) != 1 {
		t.Fatalf("cache entries %v, want one", got)
	}
	entry := filepath.Join(converted, entries()[0])
	t.Logf("a whole import checks its context %d times", total)

	// Cancelled while the entry is checked: the entry stays.
	ctx := fixtures.CancelAfter(context.Background(), 3)
	if _, err := OpenCached(ctx, dir, cache); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while checking the entry: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Errorf("the cache entry was removed by a cancel: %v", err)
	}
	clean("cancelled check")

	// Cancelled while importing and converting: nothing is left.
	os.RemoveAll(converted)
	for i := range int64(8) {
		n := i * (total - 1) / 7
		ctx := fixtures.CancelAfter(context.Background(), n)
		m, err := OpenCached(ctx, dir, cache)
		if !errors.Is(err, context.Canceled) {
			if err == nil {
				m.Close()
			}
			t.Fatalf("cancelled at check %d of %d: %v, want context.Canceled", n, total, err)
		}
		if got := entries(); len(got) != 0 {
			t.Errorf("cancelled at check %d of %d: the cache holds %v", n, total, got)
		}
		clean("cancelled import")
	}
}

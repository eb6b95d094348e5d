//go:build js

package download

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/cortiq/cortiq/storage/opfs"
	"github.com/hack-pad/hackpadfs"
)

// browserDataLen matches browser_test.go's server.
const browserDataLen = 3<<20 + 777

var browserDirs atomic.Int64

func browserSetup(t *testing.T, query string) (base string, fsys *opfs.FS) {
	t.Helper()
	base = os.Getenv("WASMTEST_SERVER")
	if base == "" {
		t.Skip("download: WASMTEST_SERVER unset; run via TestInChromium")
	}
	resp, err := http.Get(base + "reset?" + query)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	fsys, err = opfs.New(fmt.Sprintf("dltest/%d", browserDirs.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return base, fsys
}

func seen(t *testing.T, base string) (ranges, ifRanges []string) {
	t.Helper()
	resp, err := http.Get(base + "seen")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string][]string
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v["ranges"], v["ifRanges"]
}

func TestBrowserResumeIntoOPFS(t *testing.T) {
	const off = 1<<20 + 12345
	base, fsys := browserSetup(t, "failAt="+strconv.Itoa(off))
	want := testData(browserDataLen)
	opt := Options{SHA256: sum(want), Quota: CheckSpace(opfs.Free)}
	if _, err := Fetch(context.Background(), fsys, base+"blob", "m/blob.bin", opt); err == nil {
		t.Fatal("interrupted Fetch succeeded")
	} else {
		t.Logf("interrupted as planned: %v", err)
	}
	// The browser may lose bytes that were in flight when the connection
	// died, so the part holds at most off bytes.
	fi, err := fsys.Stat("m/blob.bin" + PartSuffix)
	if err != nil || fi.Size() == 0 || fi.Size() > off {
		t.Fatalf("part after interruption: %v, %v; want 1..%d bytes", fi, err, off)
	}
	part := fi.Size()
	t.Logf("part holds %d of the %d bytes sent before the abort", part, off)
	res, err := Fetch(context.Background(), fsys, base+"blob", "m/blob.bin", opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != part || res.Verified != VerifiedSHA256 {
		t.Fatalf("result %+v", res)
	}
	got, err := hackpadfs.ReadFile(fsys, "m/blob.bin")
	if err != nil || string(got) != string(want) {
		t.Fatalf("OPFS content wrong (%d bytes, %v)", len(got), err)
	}
	if _, err := fsys.Stat("m/blob.bin" + SidecarSuffix); !errors.Is(err, hackpadfs.ErrNotExist) {
		t.Errorf("sidecar left behind: %v", err)
	}
	ranges, ifRanges := seen(t, base)
	t.Logf("server saw Range %q, If-Range %q", ranges, ifRanges)
	if len(ranges) != 2 || ranges[1] != fmt.Sprintf("bytes=%d-", part) || ifRanges[1] != `"v1"` {
		t.Fatalf("server saw Range %q If-Range %q", ranges, ifRanges)
	}
}

func TestBrowserIgnoredRangeAndQuota(t *testing.T) {
	base, fsys := browserSetup(t, "failAt=5000&ignoreRange=1")
	want := testData(browserDataLen)
	Fetch(context.Background(), fsys, base+"blob", "blob", Options{})
	res, err := Fetch(context.Background(), fsys, base+"blob", "blob", Options{SHA256: sum(want)})
	if err != nil || res.Resumed != 0 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	_, err = Fetch(context.Background(), fsys, base+"blob", "other", Options{Quota: CheckSpace(func() (int64, error) { return 100, nil })})
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("quota error = %v", err)
	}
	usage, quota, err := opfs.Estimate()
	t.Logf("OPFS estimate: usage %d quota %d err %v", usage, quota, err)
}

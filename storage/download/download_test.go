//go:build !js

package download

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortiq/cortiq/storage"
	"github.com/hack-pad/hackpadfs"
	"github.com/hack-pad/hackpadfs/mem"
)

// fileServer serves one blob with controllable misbehaviour and records the
// conditional headers it receives.
type fileServer struct {
	mu          sync.Mutex
	data        []byte
	etag        string // sent as ETag; "" for none
	ignoreRange bool   // always answer 200 with the whole body
	ignoreIf    bool   // honour Range even when If-Range does not match
	chunked     bool   // omit Content-Length
	failAt      []int64
	corruptAt   int64 // flip this byte of the body; -1 for none
	extra       []byte
	linkedSHA   string // if set, /resolve/ redirects with X-Linked-Etag
	linkedSize  int64
	abortDelay  time.Duration // pause between the last byte and the abort
	encoding    string        // Content-Encoding to send; "gzip" compresses the body
	garbageTail bool          // answer range requests with garbage of the right length

	ranges, ifRanges []string
}

func newFileServer(data []byte) *fileServer {
	return &fileServer{data: data, etag: `"v1"`, corruptAt: -1, linkedSize: -1}
}

func (s *fileServer) set(fn func(s *fileServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func (s *fileServer) seen() (ranges, ifRanges []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...), append([]string(nil), s.ifRanges...)
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.Path, "/resolve/") {
		s.mu.Lock()
		if s.linkedSHA != "" {
			w.Header().Set("X-Linked-Etag", `"`+s.linkedSHA+`"`)
		}
		if s.linkedSize >= 0 {
			w.Header().Set("X-Linked-Size", strconv.FormatInt(s.linkedSize, 10))
		}
		s.mu.Unlock()
		http.Redirect(w, r, "/cdn/blob", http.StatusFound)
		return
	}
	s.mu.Lock()
	data := append([]byte(nil), s.data...)
	etag := s.etag
	rng, ifr := r.Header.Get("Range"), r.Header.Get("If-Range")
	s.ranges = append(s.ranges, rng)
	s.ifRanges = append(s.ifRanges, ifr)
	ignoreRange, ignoreIf, chunked := s.ignoreRange, s.ignoreIf, s.chunked
	var failAt int64 = -1
	if len(s.failAt) > 0 {
		failAt = s.failAt[0]
		s.failAt = s.failAt[1:]
	}
	corruptAt, extra, abortDelay := s.corruptAt, s.extra, s.abortDelay
	encoding, garbageTail := s.encoding, s.garbageTail
	s.mu.Unlock()

	if corruptAt >= 0 && corruptAt < int64(len(data)) {
		data[corruptAt] ^= 0xff
	}
	data = append(data, extra...)
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	w.Header().Set("Accept-Ranges", "bytes")
	start := int64(0)
	status := http.StatusOK
	if rng != "" && !ignoreRange && (ifr == "" || ifr == etag || ignoreIf) {
		from, ok := strings.CutPrefix(rng, "bytes=")
		from, ok2 := strings.CutSuffix(from, "-")
		n, err := strconv.ParseInt(from, 10, 64)
		if !ok || !ok2 || err != nil {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		if n >= int64(len(data)) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, status = n, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(data)-1, len(data)))
	}
	body := data[start:]
	if status == http.StatusPartialContent && garbageTail {
		body = bytes.Repeat([]byte{0x5a}, len(body))
	}
	switch encoding {
	case "":
	case "gzip":
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
		w.Header().Set("Content-Encoding", encoding)
	default:
		w.Header().Set("Content-Encoding", encoding)
	}
	if !chunked {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	if failAt >= 0 && failAt >= start && failAt-start < int64(len(body)) {
		w.Write(body[:failAt-start])
		w.(http.Flusher).Flush()
		time.Sleep(abortDelay)
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}
	w.Write(body)
}

func newFS(t *testing.T) hackpadfs.FS {
	t.Helper()
	fsys, err := mem.NewFS()
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

func start(t *testing.T, s *fileServer) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL + "/files/blob.bin"
}

func mustContent(t *testing.T, fsys hackpadfs.FS, name string, want []byte) {
	t.Helper()
	got, err := hackpadfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the expected %d", name, len(got), len(want))
	}
}

func mustNotExist(t *testing.T, fsys hackpadfs.FS, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := hackpadfs.Stat(fsys, name); !errors.Is(err, hackpadfs.ErrNotExist) {
			t.Errorf("%s: Stat error %v, want not-exist", name, err)
		}
	}
}

func TestFullDownload(t *testing.T) {
	data := testData(3<<20 + 17)
	s := newFileServer(data)
	url := start(t, s)
	fsys := newFS(t)
	res, err := Fetch(context.Background(), fsys, url, "models/m/blob.bin", Options{SHA256: sum(data)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified != VerifiedSHA256 || res.Size != int64(len(data)) || res.SHA256 != sum(data) || res.Cached || res.Resumed != 0 {
		t.Fatalf("result %+v", res)
	}
	mustContent(t, fsys, "models/m/blob.bin", data)
	mustNotExist(t, fsys, "models/m/blob.bin"+PartSuffix, "models/m/blob.bin"+SidecarSuffix)

	// A verified file is trusted without network access.
	s.set(func(s *fileServer) { s.ranges = nil })
	res, err = Fetch(context.Background(), fsys, url, "models/m/blob.bin", Options{})
	if err != nil || !res.Cached || res.Size != int64(len(data)) {
		t.Fatalf("second Fetch = %+v, %v; want Cached", res, err)
	}
	if r, _ := s.seen(); len(r) != 0 {
		t.Fatalf("cached Fetch made %d requests", len(r))
	}
	res, err = Fetch(context.Background(), fsys, url, "models/m/blob.bin", Options{SHA256: sum(data), VerifyCached: true})
	if err != nil || !res.Cached || res.Verified != VerifiedSHA256 {
		t.Fatalf("VerifyCached Fetch = %+v, %v", res, err)
	}
}

func TestResumeAtOffsets(t *testing.T) {
	data := testData(2<<20 + 5)
	for _, off := range []int64{1, 4096, 1 << 20, int64(len(data)) - 1} {
		t.Run(strconv.FormatInt(off, 10), func(t *testing.T) {
			s := newFileServer(data)
			s.failAt = []int64{off}
			url := start(t, s)
			fsys := newFS(t)
			_, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
			if err == nil {
				t.Fatal("interrupted Fetch succeeded")
			}
			mustNotExist(t, fsys, "blob")
			if fi, err := hackpadfs.Stat(fsys, "blob"+PartSuffix); err != nil || fi.Size() != off {
				t.Fatalf("part after interruption: %v, %v; want %d bytes", fi, err, off)
			}
			res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Resumed != off || res.Verified != VerifiedSHA256 {
				t.Fatalf("result %+v, want Resumed %d", res, off)
			}
			mustContent(t, fsys, "blob", data)
			mustNotExist(t, fsys, "blob"+PartSuffix, "blob"+SidecarSuffix)
			ranges, ifRanges := s.seen()
			if len(ranges) != 2 || ranges[0] != "" || ranges[1] != fmt.Sprintf("bytes=%d-", off) || ifRanges[1] != `"v1"` {
				t.Fatalf("server saw Range %q If-Range %q", ranges, ifRanges)
			}
		})
	}
}

func TestRetriesResumeWithinOneCall(t *testing.T) {
	data := testData(1<<20 + 99)
	s := newFileServer(data)
	s.failAt = []int64{1000, 500000, 900000}
	url := start(t, s)
	fsys := newFS(t)
	var (
		last      int64 = -1
		decreased bool
		final     Progress
	)
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{
		Retries:          3,
		RetryDelay:       time.Millisecond,
		ProgressInterval: time.Nanosecond,
		Progress: func(p Progress) {
			if p.Done < last {
				decreased = true
			}
			last, final = p.Done, p
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified != VerifiedSize || res.Resumed != 900000 {
		t.Fatalf("result %+v", res)
	}
	mustContent(t, fsys, "blob", data)
	if decreased {
		t.Error("progress went backwards")
	}
	if final.Done != int64(len(data)) || final.Total != int64(len(data)) || final.Rate <= 0 {
		t.Errorf("final progress %+v", final)
	}
	ranges, _ := s.seen()
	want := []string{"", "bytes=1000-", "bytes=500000-", "bytes=900000-"}
	if fmt.Sprint(ranges) != fmt.Sprint(want) {
		t.Errorf("ranges %q, want %q", ranges, want)
	}
}

func TestServerIgnoresRange(t *testing.T) {
	data := testData(300000)
	s := newFileServer(data)
	s.failAt = []int64{123456}
	url := start(t, s)
	fsys := newFS(t)
	if _, err := Fetch(context.Background(), fsys, url, "blob", Options{}); err == nil {
		t.Fatal("interrupted Fetch succeeded")
	}
	s.set(func(s *fileServer) { s.ignoreRange = true })
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 0 {
		t.Errorf("Resumed = %d after a 200 answer, want 0", res.Resumed)
	}
	mustContent(t, fsys, "blob", data)
	if ranges, _ := s.seen(); ranges[1] != "bytes=123456-" {
		t.Errorf("second request Range %q", ranges[1])
	}
}

func TestValidatorChangedMidResume(t *testing.T) {
	oldData, newData := testData(200000), bytes.Repeat([]byte("new!"), 60000)
	for _, honourIfRange := range []bool{true, false} {
		t.Run(fmt.Sprintf("ifrange=%v", honourIfRange), func(t *testing.T) {
			s := newFileServer(oldData)
			s.failAt = []int64{100000}
			url := start(t, s)
			fsys := newFS(t)
			if _, err := Fetch(context.Background(), fsys, url, "blob", Options{}); err == nil {
				t.Fatal("interrupted Fetch succeeded")
			}
			s.set(func(s *fileServer) {
				s.data, s.etag, s.ignoreIf = newData, `"v2"`, !honourIfRange
			})
			res, err := Fetch(context.Background(), fsys, url, "blob", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Resumed != 0 {
				t.Errorf("Resumed = %d across a changed ETag", res.Resumed)
			}
			mustContent(t, fsys, "blob", newData)
			if _, ifr := s.seen(); ifr[1] != `"v1"` {
				t.Errorf("resume If-Range %q, want the old ETag", ifr[1])
			}
		})
	}
}

func TestNoValidatorRestarts(t *testing.T) {
	data := testData(50000)
	s := newFileServer(data)
	s.etag = ""
	s.failAt = []int64{20000}
	url := start(t, s)
	fsys := newFS(t)
	Fetch(context.Background(), fsys, url, "blob", Options{})
	if _, err := Fetch(context.Background(), fsys, url, "blob", Options{}); err != nil {
		t.Fatal(err)
	}
	mustContent(t, fsys, "blob", data)
	if ranges, _ := s.seen(); ranges[1] != "" {
		t.Errorf("resumed with Range %q without any validator", ranges[1])
	}
}

func TestWrongLength(t *testing.T) {
	data := testData(10000)
	t.Run("announced", func(t *testing.T) {
		url := start(t, newFileServer(data))
		fsys := newFS(t)
		_, err := Fetch(context.Background(), fsys, url, "blob", Options{Size: 9999})
		if !errors.Is(err, ErrLength) || !strings.Contains(err.Error(), "expected 9999 bytes, server has 10000") || !strings.Contains(err.Error(), url) {
			t.Fatalf("err = %v", err)
		}
		mustNotExist(t, fsys, "blob", "blob"+PartSuffix, "blob"+SidecarSuffix)
	})
	t.Run("sent more", func(t *testing.T) {
		s := newFileServer(data)
		s.chunked, s.extra = true, []byte("trailing junk")
		url := start(t, s)
		fsys := newFS(t)
		_, err := Fetch(context.Background(), fsys, url, "blob", Options{Size: int64(len(data))})
		if !errors.Is(err, ErrLength) || !strings.Contains(err.Error(), "more than the expected 10000 bytes") {
			t.Fatalf("err = %v", err)
		}
		mustNotExist(t, fsys, "blob", "blob"+PartSuffix, "blob"+SidecarSuffix)
	})
	t.Run("sent less", func(t *testing.T) {
		s := newFileServer(data[:5000])
		s.chunked = true
		url := start(t, s)
		fsys := newFS(t)
		_, err := Fetch(context.Background(), fsys, url, "blob", Options{Size: int64(len(data))})
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "after 5000 of 10000 bytes") {
			t.Fatalf("err = %v", err)
		}
		mustNotExist(t, fsys, "blob")
	})
	t.Run("linked size", func(t *testing.T) {
		s := newFileServer(data)
		s.linkedSize = 12345
		srv := httptest.NewServer(s)
		defer srv.Close()
		fsys := newFS(t)
		_, err := Fetch(context.Background(), fsys, srv.URL+"/r/resolve/main/blob", "blob", Options{})
		if !errors.Is(err, ErrLength) || !strings.Contains(err.Error(), "X-Linked-Size says 12345") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCorruptedBytes(t *testing.T) {
	data := testData(70000)
	s := newFileServer(data)
	s.etag = `"` + sum(data) + `"` // the server's own digest, like an LFS oid
	s.corruptAt = 4242
	url := start(t, s)
	fsys := newFS(t)
	_, err := Fetch(context.Background(), fsys, url, "blob", Options{})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "server advertised sha256 "+sum(data)) || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v", err)
	}
	mustNotExist(t, fsys, "blob", "blob"+PartSuffix, "blob"+SidecarSuffix)

	s.set(func(s *fileServer) { s.corruptAt = -1 })
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{})
	if err != nil || res.Verified != VerifiedETag {
		t.Fatalf("clean Fetch = %+v, %v; want server-sha256 verification", res, err)
	}
}

func TestWrongSHA256(t *testing.T) {
	data := testData(5000)
	url := start(t, newFileServer(data))
	fsys := newFS(t)
	want := strings.Repeat("ab", 32)
	_, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: want})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "expected sha256 "+want+", got "+sum(data)) {
		t.Fatalf("err = %v", err)
	}
	mustNotExist(t, fsys, "blob", "blob"+PartSuffix, "blob"+SidecarSuffix)
	if _, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: "xyz"}); err == nil {
		t.Fatal("malformed SHA256 accepted")
	}
}

func TestResumeOfCompletePart(t *testing.T) {
	// Interrupted after the last byte but before the rename: the resume asks
	// for nothing more (416) and just verifies.
	data := testData(4000)
	s := newFileServer(data)
	url := start(t, s)
	fsys := newFS(t)
	hackpadfs.WriteFullFile(fsys, "blob"+PartSuffix, data, 0o644)
	sc := &sidecar{Version: sidecarVersion, URL: url, Size: int64(len(data)), Validator: `"v1"`, Done: int64(len(data))}
	hackpadfs.WriteFullFile(fsys, "blob"+SidecarSuffix, sc.marshal(), 0o644)
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
	if err != nil || res.Resumed != int64(len(data)) || res.Verified != VerifiedSHA256 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	mustContent(t, fsys, "blob", data)
}

func TestCorruptSidecarRestarts(t *testing.T) {
	data := testData(4000)
	s := newFileServer(data)
	url := start(t, s)
	fsys := newFS(t)
	hackpadfs.WriteFullFile(fsys, "blob"+PartSuffix, []byte("garbage"), 0o644)
	hackpadfs.WriteFullFile(fsys, "blob"+SidecarSuffix, []byte(`{"version":1,`), 0o644)
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{})
	if err != nil || res.Resumed != 0 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	mustContent(t, fsys, "blob", data)
	if ranges, _ := s.seen(); ranges[0] != "" {
		t.Errorf("resumed from a corrupt sidecar: Range %q", ranges[0])
	}
}

func TestHuggingFaceRedirect(t *testing.T) {
	data := testData(90000)
	s := newFileServer(data)
	s.etag = `"d41d8cd98f00b204e9800998ecf8427e"` // CDN ETag, not a sha256
	s.linkedSHA, s.linkedSize = sum(data), int64(len(data))
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := Hub{Endpoint: srv.URL + "/"}.ResolveURL("org/model", "sub dir/model.safetensors", "")
	if want := srv.URL + "/org/model/resolve/main/sub%20dir/model.safetensors"; url != want {
		t.Fatalf("ResolveURL = %q, want %q", url, want)
	}
	fsys := newFS(t)
	res, err := Fetch(context.Background(), fsys, url, "m.safetensors", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified != VerifiedETag {
		t.Fatalf("Verified = %v, want server-sha256 from X-Linked-Etag", res.Verified)
	}
	mustContent(t, fsys, "m.safetensors", data)
}

func TestHFResolveURL(t *testing.T) {
	for _, tc := range []struct{ repo, file, rev, want string }{
		{"gpt2", "config.json", "", "https://huggingface.co/gpt2/resolve/main/config.json"},
		{"org/m", "a/b.gguf", "v1.0", "https://huggingface.co/org/m/resolve/v1.0/a/b.gguf"},
		{"org/m", "x.bin", "refs/pr/1", "https://huggingface.co/org/m/resolve/refs%2Fpr%2F1/x.bin"},
	} {
		if got := (Hub{}).ResolveURL(tc.repo, tc.file, tc.rev); got != tc.want {
			t.Errorf("ResolveURL(%q, %q, %q) = %q, want %q", tc.repo, tc.file, tc.rev, got, tc.want)
		}
	}
	if h := (Hub{Token: "tok"}).Header(); h.Get("Authorization") != "Bearer tok" {
		t.Errorf("Header = %v", h)
	}
	if h := (Hub{}).Header(); h != nil {
		t.Errorf("Header without a token = %v, want nil", h)
	}
}

func TestQuota(t *testing.T) {
	data := testData(10000)
	s := newFileServer(data)
	url := start(t, s)
	fsys := newFS(t)
	var asked int64
	quota := CheckSpace(func() (int64, error) { return 4096, nil })
	_, err := Fetch(context.Background(), fsys, url, "blob", Options{Quota: func(n int64) error {
		asked = n
		return quota(n)
	}})
	var qe *QuotaError
	if !errors.Is(err, ErrQuota) || !errors.As(err, &qe) || qe.Needed != 10000 || qe.Available != 4096 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "need 10000 bytes, 4096 available") || asked != 10000 {
		t.Errorf("err = %v, asked %d", err, asked)
	}
	mustNotExist(t, fsys, "blob")
}

func TestHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/gone") {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	fsys := newFS(t)
	_, err := Fetch(context.Background(), fsys, srv.URL+"/gone", "blob", Options{Retries: 2, RetryDelay: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err = %v", err)
	}
	_, err = Fetch(context.Background(), fsys, srv.URL+"/busy", "blob", Options{Retries: 1, RetryDelay: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in                string
		start, end, total int64
		ok                bool
	}{
		{"bytes 0-9/10", 0, 9, 10, true},
		{"bytes 5-9/*", 5, 9, -1, true},
		{"bytes 5-10/10", 0, 0, 0, false},
		{"bytes 9-5/10", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
		{"bytes -1-5/10", 0, 0, 0, false},
	} {
		s, e, n, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (s != tc.start || e != tc.end || n != tc.total)) {
			t.Errorf("parseContentRange(%q) = %d %d %d %v", tc.in, s, e, n, ok)
		}
	}
}

func TestCancelThenResume(t *testing.T) {
	data := testData(4 << 20)
	s := newFileServer(data)
	url := start(t, s)
	fsys := newFS(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Fetch(ctx, fsys, url, "blob", Options{
		Retries:          5,
		ProgressInterval: time.Nanosecond,
		Progress: func(p Progress) {
			if p.Done >= 1<<20 {
				cancel()
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	fi, err := hackpadfs.Stat(fsys, "blob"+PartSuffix)
	if err != nil || fi.Size() < 1<<20 {
		t.Fatalf("part after cancel: %v, %v", fi, err)
	}
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
	if err != nil || res.Resumed < 1<<20 {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	mustContent(t, fsys, "blob", data)
}

func TestFetchIntoOSDir(t *testing.T) {
	data := testData(1<<20 + 3)
	s := newFileServer(data)
	s.failAt = []int64{777777}
	url := start(t, s)
	fsys, err := storage.Dir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Fetch(context.Background(), fsys, url, "hf/org/model/blob", Options{Retries: 1, RetryDelay: time.Millisecond, SHA256: sum(data)})
	if err != nil || res.Resumed != 777777 || res.Verified != VerifiedSHA256 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	mustContent(t, fsys, "hf/org/model/blob", data)
	mustNotExist(t, fsys, "hf/org/model/blob"+PartSuffix, "hf/org/model/blob"+SidecarSuffix)
}

func TestNoValidatorResumesWithCallerDigest(t *testing.T) {
	data := testData(50000)
	s := newFileServer(data)
	s.etag = ""
	s.failAt = []int64{20000}
	url := start(t, s)
	fsys := newFS(t)
	Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
	if err != nil || res.Resumed != 20000 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	mustContent(t, fsys, "blob", data)
	if ranges, ifr := s.seen(); ranges[1] != "bytes=20000-" || ifr[1] != "" {
		t.Errorf("resume sent Range %q If-Range %q", ranges[1], ifr[1])
	}
}

// exactly is a Check that accepts only want: the strongest structural check,
// so a test can tell whether Check ran over the whole file.
func exactly(want []byte) func(r io.ReaderAt, size int64) error {
	return func(r io.ReaderAt, size int64) error {
		got, err := io.ReadAll(io.NewSectionReader(r, 0, size))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return errors.New("not the expected file")
		}
		return nil
	}
}

// The lying servers of issue 12: without any digest, Check decides; what it
// rejects is never promoted, and once the server is good again the next
// call fetches the good file.
func TestLyingServerWithoutDigest(t *testing.T) {
	data := testData(60000)
	garbage := bytes.Repeat([]byte("junk"), 15000) // the right length
	for _, tc := range []struct {
		name    string
		chunked bool
		body    []byte
	}{
		{"wrong body", false, []byte("<html>not the file</html>")},
		{"right length garbage", false, garbage},
		{"chunked garbage", true, garbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFileServer(tc.body)
			s.etag, s.chunked = "", tc.chunked
			url := start(t, s)
			fsys := newFS(t)
			opt := Options{Check: exactly(data), Retries: 2, RetryDelay: time.Millisecond}
			_, err := Fetch(context.Background(), fsys, url, "m/blob", opt)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), url) {
				t.Fatalf("err = %v, want ErrInvalid naming the URL", err)
			}
			mustNotExist(t, fsys, "m/blob", "m/blob"+PartSuffix, "m/blob"+SidecarSuffix)
			s.set(func(s *fileServer) { s.data = data })
			res, err := Fetch(context.Background(), fsys, url, "m/blob", opt)
			if err != nil || res.Verified != VerifiedFormat || res.Cached {
				t.Fatalf("good server: %+v, %v; want a fresh download verified by format", res, err)
			}
			mustContent(t, fsys, "m/blob", data)
		})
	}
}

// Check runs even when the server's own digest matched (a server can lie
// about both), but not when the caller's pinned digest did.
func TestCheckAfterServerDigest(t *testing.T) {
	garbage := testData(5000)
	s := newFileServer(garbage)
	s.etag = `"` + sum(garbage) + `"`
	url := start(t, s)
	fsys := newFS(t)
	_, err := Fetch(context.Background(), fsys, url, "blob", Options{Check: exactly([]byte("the real file"))})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(garbage), Check: exactly(nil)})
	if err != nil || res.Verified != VerifiedSHA256 {
		t.Fatalf("pinned digest: %+v, %v", res, err)
	}
}

func TestContentEncoding(t *testing.T) {
	data := testData(100000)
	t.Run("gzip decoded", func(t *testing.T) {
		s := newFileServer(data)
		s.encoding = "gzip"
		url := start(t, s)
		fsys := newFS(t)
		res, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
		if err != nil || res.Verified != VerifiedSHA256 {
			t.Fatalf("Fetch = %+v, %v", res, err)
		}
		mustContent(t, fsys, "blob", data)
	})
	t.Run("gzip garbage", func(t *testing.T) {
		s := newFileServer(bytes.Repeat([]byte("z"), 5000))
		s.encoding = "gzip"
		url := start(t, s)
		fsys := newFS(t)
		_, err := Fetch(context.Background(), fsys, url, "blob", Options{Check: exactly(data)})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		mustNotExist(t, fsys, "blob", "blob"+PartSuffix)
	})
	t.Run("other refused", func(t *testing.T) {
		s := newFileServer(data)
		s.encoding = "br"
		url := start(t, s)
		fsys := newFS(t)
		_, err := Fetch(context.Background(), fsys, url, "blob", Options{})
		if !errors.Is(err, ErrEncoding) || !strings.Contains(err.Error(), `"br"`) {
			t.Fatalf("err = %v, want ErrEncoding", err)
		}
		mustNotExist(t, fsys, "blob", "blob"+PartSuffix)
	})
	t.Run("asks for identity", func(t *testing.T) {
		var got string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.Header.Get("Accept-Encoding")
			w.Write(data)
		}))
		defer srv.Close()
		if _, err := Fetch(context.Background(), newFS(t), srv.URL, "blob", Options{}); err != nil || got != "identity" {
			t.Fatalf("Accept-Encoding %q, err %v", got, err)
		}
	})
}

// A resume whose tail is garbage fails verification over the whole file;
// the same call then starts over from zero and gets the good file.
func TestResumedGarbageTailRestarts(t *testing.T) {
	data := testData(300000)
	for _, tc := range []struct {
		name string
		opt  Options
		want Verification
	}{
		{"pinned", Options{SHA256: sum(data)}, VerifiedSHA256},
		{"check", Options{Check: exactly(data)}, VerifiedFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFileServer(data)
			s.failAt = []int64{120000}
			s.garbageTail = true
			url := start(t, s)
			fsys := newFS(t)
			if _, err := Fetch(context.Background(), fsys, url, "blob", tc.opt); err == nil {
				t.Fatal("interrupted Fetch succeeded")
			}
			res, err := Fetch(context.Background(), fsys, url, "blob", tc.opt)
			if err != nil || res.Resumed != 0 || res.Verified != tc.want {
				t.Fatalf("Fetch = %+v, %v; want a verified restart from zero", res, err)
			}
			mustContent(t, fsys, "blob", data)
			if ranges, _ := s.seen(); fmt.Sprint(ranges) != fmt.Sprint([]string{"", "bytes=120000-", ""}) {
				t.Errorf("server saw Range %q", ranges)
			}
		})
	}
	t.Run("always lying", func(t *testing.T) {
		s := newFileServer(data)
		s.failAt = []int64{120000}
		s.garbageTail, s.corruptAt = true, 7
		url := start(t, s)
		fsys := newFS(t)
		Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
		_, err := Fetch(context.Background(), fsys, url, "blob", Options{SHA256: sum(data)})
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("err = %v, want ErrChecksum", err)
		}
		mustNotExist(t, fsys, "blob", "blob"+PartSuffix, "blob"+SidecarSuffix)
	})
}

// stallServer answers after release is closed: before the headers
// (headers=false) or after sending the first half of data.
func stallServer(t *testing.T, data []byte, headers bool) (url string, requests func() int, release func()) {
	t.Helper()
	ch := make(chan struct{})
	var (
		mu sync.Mutex
		n  int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		if !headers {
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		select {
		case <-ch:
		case <-r.Context().Done():
		}
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(srv.Close)
	t.Cleanup(release)
	return srv.URL + "/blob", func() int { mu.Lock(); defer mu.Unlock(); return n }, release
}

func TestStallBeforeHeaders(t *testing.T) {
	data := testData(10000)
	url, requests, _ := stallServer(t, data, false)
	fsys := newFS(t)
	var reports []Progress
	_, err := Fetch(context.Background(), fsys, url, "blob", Options{
		HeaderTimeout: 100 * time.Millisecond, Retries: 1, RetryDelay: time.Millisecond,
		Progress: func(p Progress) { reports = append(reports, p) },
	})
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "no response headers within 0.1s") || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v, want ErrStalled naming the URL and what stalled", err)
	}
	if n := requests(); n != 2 {
		t.Errorf("%d requests, want 2 (a stall is retried)", n)
	}
	if len(reports) == 0 || reports[0].Done != 0 {
		t.Errorf("progress before the server answered: %+v, want a report of 0 bytes", reports)
	}
	mustNotExist(t, fsys, "blob")
}

func TestStallMidBody(t *testing.T) {
	data := testData(100000)
	url, _, release := stallServer(t, data, true)
	fsys := newFS(t)
	var (
		mu      sync.Mutex
		stalled Progress
	)
	_, err := Fetch(context.Background(), fsys, url, "blob", Options{
		IdleTimeout: 2 * time.Second, ProgressInterval: 10 * time.Millisecond,
		Progress: func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Done > 0 && p.Stalled > stalled.Stalled {
				stalled = p
			}
		},
	})
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "no data for 2s") || !strings.Contains(err.Error(), "after 50000 of 100000 bytes") {
		t.Fatalf("err = %v, want ErrStalled after 50000 bytes", err)
	}
	mu.Lock()
	if stalled.Done != 50000 || stalled.Total != 100000 {
		t.Errorf("no progress report showed the stall at 50000 of 100000 bytes: %+v", stalled)
	}
	mu.Unlock()
	// The part is kept, recorded in the sidecar, and resumed.
	b, err := hackpadfs.ReadFile(fsys, "blob"+SidecarSuffix)
	if err != nil {
		t.Fatalf("sidecar after the stall: %v", err)
	}
	if sc, err := parseSidecar(b); err != nil || sc.Done != 50000 {
		t.Fatalf("sidecar %+v, %v; want done 50000", sc, err)
	}
	release()
	s := newFileServer(data)
	good := start(t, s)
	hackpadfs.WriteFullFile(fsys, "blob"+SidecarSuffix, bytes.Replace(b, []byte(url), []byte(good), 1), 0o644)
	res, err := Fetch(context.Background(), fsys, good, "blob", Options{SHA256: sum(data)})
	if err != nil || res.Resumed != 50000 {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	mustContent(t, fsys, "blob", data)
}

// Permanent HTTP errors are reported at once, never retried.
func TestPermanentHTTPErrors(t *testing.T) {
	for _, code := range []int{401, 403, 404, 410, 503} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			var n int
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n++
				mu.Unlock()
				http.Error(w, "no", code)
			}))
			defer srv.Close()
			_, err := Fetch(context.Background(), newFS(t), srv.URL+"/org/m/resolve/main/x.gguf", "blob", Options{Retries: 3, RetryDelay: time.Millisecond})
			var he *HTTPError
			if !errors.As(err, &he) || he.StatusCode != code || !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("err = %v, want an HTTPError %d naming the URL", err, code)
			}
			want := 1
			if code == 503 {
				want = 4
			}
			if n != want || he.Permanent() != (code != 503) {
				t.Errorf("%d requests (want %d), Permanent %v", n, want, he.Permanent())
			}
			if (code == 401 || code == 403) && !strings.Contains(err.Error(), "access token") {
				t.Errorf("err = %v, want a hint about an access token", err)
			}
		})
	}
}

// Package download fetches files over HTTP(S) into a hackpadfs file system
// (natively the cache directory, in the browser OPFS) with resume and
// verification, so the same code serves both worlds.
//
// Contract of Fetch(ctx, fsys, url, dst, opt):
//
//   - Bytes go to <dst>.part; <dst>.part.json (the sidecar) records the URL,
//     expected size, validator (strong ETag or Last-Modified) and the number
//     of bytes synced so far.
//   - An interrupted download resumes from the recorded offset with
//     "Range: bytes=N-" and "If-Range: <validator>". It starts over from 0
//     when the server ignores the range (200), the validator or the server's
//     digest changed, the sidecar is unreadable, or neither a validator nor
//     the caller's SHA256 is known.
//     The part's existing bytes are re-hashed on resume, never trusted.
//   - Verification, strongest available: the caller's SHA256; else the
//     server's sha256 (Hugging Face sends the LFS oid as X-Linked-Etag on the
//     resolve redirect, or a 64-hex strong ETag); then, unless the caller's
//     digest matched, the caller's structural Check of the whole file (a
//     format parse: header, and that the declared data fits); else only the
//     size. Result.Verified says which happened. Callers that put files in
//     a cache pass SHA256 or Check, so that nothing unverified is promoted.
//   - Only a verified download is renamed to dst, so an existing dst is
//     always trusted: Fetch returns it as Cached without network access
//     (re-hashing it only when Options.VerifyCached is set).
//   - A wrong length, wrong digest or failed Check give an error naming
//     the URL and expected vs got, and remove the part and sidecar so no
//     later call trusts them. When the bytes that failed were partly resumed
//     from an earlier attempt, the download first starts over from zero
//     once, in the same call: a resumed tail that does not belong to the
//     prefix is never kept. Network errors leave them for a later resume.
//   - Requests ask for Accept-Encoding: identity. A gzip Content-Encoding
//     is decoded (the digest is of the decoded file; such a download is not
//     resumed); any other encoding is refused.
//   - HTTP 401, 403, 404 and 410 are permanent (an *HTTPError, never
//     retried); 5xx, 408, 429 and network errors are retried (Retries).
//   - A server that stalls is given up on (ErrStalled, retried like a
//     network error): no connection within ConnectTimeout, no response
//     headers within HeaderTimeout, no body bytes for IdleTimeout. The part
//     is kept for a later resume, as on any interruption, including a
//     cancelled ctx (a program's SIGINT/SIGTERM).
//
// In the browser (GOOS=js) net/http uses fetch(): redirects are followed by
// the browser, so X-Linked-Etag of a cross-origin redirect is not visible
// and Hugging Face downloads fall back to size verification unless the
// caller passes SHA256; cross-origin servers must allow and expose the Range,
// If-Range, ETag and Content-Range headers through CORS.
package download

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	gofs "io/fs"
	"net"
	"net/http"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hack-pad/hackpadfs"
)

// Verification says how a download was checked before it was trusted.
type Verification int

const (
	// VerifiedNone: neither a digest nor a size was known.
	VerifiedNone Verification = iota
	// VerifiedSize: only the length matched the expected size.
	VerifiedSize
	// VerifiedETag: the sha256 the server advertised (X-Linked-Etag or a
	// strong sha256 ETag) matched, as did the size.
	VerifiedETag
	// VerifiedSHA256: the caller's sha256 matched.
	VerifiedSHA256
	// VerifiedFormat: no digest was known; Options.Check accepted the
	// whole file's structure (and the size matched, when known).
	VerifiedFormat
)

func (v Verification) String() string {
	switch v {
	case VerifiedSize:
		return "size"
	case VerifiedETag:
		return "server-sha256"
	case VerifiedSHA256:
		return "sha256"
	case VerifiedFormat:
		return "format"
	}
	return "none"
}

// Progress reports a running download. It is reported from the start
// (before the server answers) and keeps being reported while no bytes
// arrive, with Stalled growing.
type Progress struct {
	Done    int64         // bytes in the part file, including resumed ones
	Total   int64         // expected size, -1 when unknown
	Rate    float64       // bytes per second transferred by this call
	Resumed int64         // bytes reused from an earlier attempt
	Stalled time.Duration // time since the last byte arrived (or the request was sent)
}

// Options tunes Fetch. The zero value works.
type Options struct {
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
	// Header is added to every request (e.g. Authorization; see HFHeader).
	Header http.Header
	// SHA256 is the expected hex digest; "" trusts the server's digest,
	// Check, or the size.
	SHA256 string
	// Check, if set, verifies the structure of the complete file (for
	// example that it parses as GGUF and its tensor data fits) before it is
	// renamed to dst. It runs unless SHA256 matched; an error discards the
	// download (ErrInvalid).
	Check func(r io.ReaderAt, size int64) error
	// Size is the expected length in bytes; 0 means unknown.
	Size int64
	// VerifyCached re-hashes an existing dst against SHA256 (when given)
	// instead of trusting it.
	VerifyCached bool
	// Progress, if set, is called at most every ProgressInterval (default
	// 100ms) and once when the download completes. Done only goes down when
	// the server forces a restart from zero.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// Quota, if set, is called with the bytes still to be written once the
	// size is known and before any is written; an error (see QuotaError and
	// CheckSpace) aborts the download.
	Quota func(needed int64) error
	// Retries is how many times a transient failure (network error, 5xx,
	// truncated body) is resumed automatically; 0 means none.
	Retries int
	// RetryDelay is the first retry's back-off, doubled each time; 0 means
	// one second.
	RetryDelay time.Duration
	// CheckpointBytes is how often (in bytes) the part is synced and the
	// sidecar updated; 0 means 16 MiB. It is also done every few seconds
	// and whenever the transfer stops.
	CheckpointBytes int64
	// ConnectTimeout bounds connecting to the server (0: 30s, negative:
	// none). It is applied to the transport when Client is nil; with a
	// caller's Client, HeaderTimeout still bounds the connection.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for a response's headers after the
	// request is sent, redirects included (0: 30s, negative: none).
	HeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next bytes of the body (0: 60s,
	// negative: none).
	IdleTimeout time.Duration
}

// Default timeouts (see Options).
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
)

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Result describes a completed Fetch.
type Result struct {
	Path     string       // dst
	Size     int64        // bytes in dst
	SHA256   string       // hex digest of dst; "" when Cached and not re-hashed
	Verified Verification // how the bytes were checked
	Resumed  int64        // bytes reused from an earlier, interrupted attempt
	Cached   bool         // dst already existed; nothing was downloaded
}

var (
	// ErrChecksum: the downloaded bytes do not hash to the expected sha256.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrLength: the server sent or announced a different number of bytes.
	ErrLength = errors.New("wrong length")
	// ErrQuota: not enough storage for the download (see QuotaError).
	ErrQuota = errors.New("not enough storage")
	// ErrInvalid: Options.Check rejected the downloaded file.
	ErrInvalid = errors.New("downloaded file is not valid")
	// ErrEncoding: the server sent a Content-Encoding other than identity
	// or gzip.
	ErrEncoding = errors.New("unsupported content encoding")
	// ErrStalled: the server stopped answering (see the timeouts in
	// Options). The part is kept for a resume.
	ErrStalled = errors.New("download stalled")
)

// stallCause is the cancellation cause of a request given up on.
type stallCause struct{ what string }

func (c *stallCause) Error() string { return c.what }

// HTTPError is an unsuccessful HTTP status. Permanent ones (401, 403, 404,
// 410) are never retried.
type HTTPError struct {
	StatusCode int
	Status     string // "404 Not Found"
}

func (e *HTTPError) Error() string {
	msg := "HTTP " + e.Status
	switch e.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (the file may be gated or private: an access token may be needed)"
	case http.StatusNotFound, http.StatusGone:
		msg += " (no such file at this URL)"
	}
	return msg
}

// Permanent reports whether retrying cannot help.
func (e *HTTPError) Permanent() bool {
	switch e.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		return true
	}
	return false
}

// QuotaError reports a failed quota pre-check.
type QuotaError struct {
	Needed, Available int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("not enough storage: need %d bytes, %d available", e.Needed, e.Available)
}

func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// CheckSpace builds an Options.Quota from a function reporting available
// bytes, such as storage.FreeSpace natively or an OPFS estimate() in the
// browser (quota - usage).
func CheckSpace(available func() (int64, error)) func(needed int64) error {
	return func(needed int64) error {
		avail, err := available()
		if err != nil {
			return fmt.Errorf("checking available storage: %w", err)
		}
		if needed > avail {
			return &QuotaError{Needed: needed, Available: avail}
		}
		return nil
	}
}

// retryable marks failures that a later attempt may get past.
type retryable struct{ err error }

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

func isRetryable(err error) bool {
	var r *retryable
	return errors.As(err, &r)
}

// restartError marks a verification failure of a download that reused
// bytes from an earlier attempt: the part was discarded and one fresh
// download from zero is worth trying.
type restartError struct{ err error }

func (r *restartError) Error() string { return r.err.Error() }
func (r *restartError) Unwrap() error { return r.err }

// inflight serializes Fetch calls for the same dst in this process; two
// writers on one part file would corrupt it.
var inflight sync.Map // dst -> *sync.Mutex

// PartSuffix and SidecarSuffix name the files of an unfinished download.
const (
	PartSuffix    = ".part"
	SidecarSuffix = ".part.json"
)

// Fetch downloads url into fsys at dst (a slash path, see package doc),
// creating dst's parent directories. fsys must support OpenFile, Mkdir,
// Remove and Rename, as every storage.FS does. Concurrent calls for the
// same dst in one process are serialized; across processes they are not.
func Fetch(ctx context.Context, fsys hackpadfs.FS, url, dst string, opt Options) (Result, error) {
	res, err := fetch(ctx, fsys, url, dst, opt)
	if err != nil {
		return res, fmt.Errorf("download %s -> %s: %w", url, dst, err)
	}
	return res, nil
}

func fetch(ctx context.Context, fsys hackpadfs.FS, url, dst string, opt Options) (Result, error) {
	if !gofs.ValidPath(dst) || dst == "." {
		return Result{}, fmt.Errorf("invalid destination path %q", dst)
	}
	if opt.SHA256 != "" {
		opt.SHA256 = strings.ToLower(opt.SHA256)
		if !isSHA256Hex(opt.SHA256) {
			return Result{}, fmt.Errorf("expected sha256 %q is not 64 hex digits", opt.SHA256)
		}
	}
	if opt.Size < 0 {
		return Result{}, fmt.Errorf("expected size %d is negative", opt.Size)
	}
	m, _ := inflight.LoadOrStore(dst, new(sync.Mutex))
	m.(*sync.Mutex).Lock()
	defer m.(*sync.Mutex).Unlock()

	if res, ok, err := cached(fsys, dst, opt); ok || err != nil {
		return res, err
	}
	if dir := path.Dir(dst); dir != "." {
		if err := hackpadfs.MkdirAll(fsys, dir, 0o755); err != nil {
			return Result{}, err
		}
	}
	d := &downloader{
		fsys: fsys, url: url, dst: dst, opt: opt,
		part: dst + PartSuffix, side: dst + SidecarSuffix,
		start: time.Now(),
	}
	d.opt.HeaderTimeout = orDefault(opt.HeaderTimeout, DefaultHeaderTimeout)
	d.opt.IdleTimeout = orDefault(opt.IdleTimeout, DefaultIdleTimeout)
	if d.opt.Client == nil {
		d.opt.Client = defaultClient(orDefault(opt.ConnectTimeout, DefaultConnectTimeout))
	}
	if d.opt.ProgressInterval <= 0 {
		d.opt.ProgressInterval = 100 * time.Millisecond
	}
	if d.opt.CheckpointBytes <= 0 {
		d.opt.CheckpointBytes = 16 << 20
	}
	delay := opt.RetryDelay
	if delay <= 0 {
		delay = time.Second
	}
	restarted := false
	for attempt := 0; ; attempt++ {
		res, err := d.attempt(ctx)
		if err == nil {
			return res, nil
		}
		var rs *restartError
		if errors.As(err, &rs) {
			if !restarted && ctx.Err() == nil {
				restarted = true
				attempt--
				continue // the part was discarded: start over from zero
			}
			err = rs.err
		}
		if !isRetryable(err) || attempt >= opt.Retries || ctx.Err() != nil {
			return Result{}, err
		}
		select {
		case <-ctx.Done():
			return Result{}, err
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// cached reports an existing, previously verified dst.
func cached(fsys hackpadfs.FS, dst string, opt Options) (Result, bool, error) {
	fi, err := hackpadfs.Stat(fsys, dst)
	if err != nil || fi.IsDir() {
		return Result{}, false, nil
	}
	if opt.Size > 0 && fi.Size() != opt.Size {
		return Result{}, false, nil // a different version: download again
	}
	res := Result{Path: dst, Size: fi.Size(), Cached: true, Verified: VerifiedNone}
	if opt.VerifyCached && opt.SHA256 != "" {
		f, err := fsys.Open(dst)
		if err != nil {
			return Result{}, false, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return Result{}, false, err
		}
		res.SHA256 = hex.EncodeToString(h.Sum(nil))
		if res.SHA256 != opt.SHA256 {
			return Result{}, false, nil
		}
		res.Verified = VerifiedSHA256
	}
	return res, true, nil
}

var (
	clientsMu sync.Mutex
	clients   = map[time.Duration]*http.Client{}
)

// defaultClient is http.DefaultClient with a dial timeout (natively; in the
// browser fetch() owns the connection).
func defaultClient(connect time.Duration) *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if runtime.GOOS == "js" || !ok || connect <= 0 {
		return http.DefaultClient
	}
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c := clients[connect]; c != nil {
		return c
	}
	t = t.Clone()
	dialer := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	t.DialContext = dialer.DialContext
	t.TLSHandshakeTimeout = connect
	c := &http.Client{Transport: t}
	clients[connect] = c
	return c
}

type downloader struct {
	fsys       hackpadfs.FS
	url, dst   string
	part, side string
	opt        Options
	start      time.Time

	// Per attempt.
	sc      *sidecar
	off     int64 // bytes of the part already hashed
	h       hash.Hash
	resumed int64
	fresh   int64 // bytes transferred by this Fetch call

	// Progress state, shared with the ticker that reports stalls.
	mu         sync.Mutex
	last       time.Time // last report
	lastByte   time.Time // last byte received, or request sent
	curDone    int64
	curTotal   int64
	curFresh   int64 // copies of fresh and resumed for the ticker
	curResumed int64
}

// discard forgets any partial download.
func (d *downloader) discard() {
	hackpadfs.Remove(d.fsys, d.part)
	hackpadfs.Remove(d.fsys, d.side)
	hackpadfs.Remove(d.fsys, d.side+".tmp")
	d.sc, d.off, d.h = nil, 0, sha256.New()
}

// load restores the partial download, if any and usable: it checks the
// sidecar and re-hashes the part's first sc.Done bytes.
func (d *downloader) load() {
	d.sc, d.off, d.h = nil, 0, sha256.New()
	b, err := hackpadfs.ReadFile(d.fsys, d.side)
	if err != nil {
		hackpadfs.Remove(d.fsys, d.part)
		return
	}
	sc, err := parseSidecar(b)
	switch {
	case err != nil, sc.URL != d.url,
		d.opt.SHA256 != "" && sc.SHA256 != "" && sc.SHA256 != d.opt.SHA256,
		d.opt.Size > 0 && sc.Size >= 0 && sc.Size != d.opt.Size:
		d.discard()
		return
	}
	fi, err := hackpadfs.Stat(d.fsys, d.part)
	if err != nil {
		d.discard()
		return
	}
	off := min(fi.Size(), sc.Done)
	if off > 0 {
		f, err := d.fsys.Open(d.part)
		if err != nil {
			d.discard()
			return
		}
		n, err := io.Copy(d.h, io.LimitReader(f, off))
		f.Close()
		if err != nil || n != off {
			d.discard()
			return
		}
	}
	d.sc, d.off = sc, off
}

// response is what attempt learned from the server.
type response struct {
	resp      *http.Response
	linkedSHA string // X-Linked-Etag seen anywhere on the redirect chain
	linkedLen int64  // X-Linked-Size, -1 if absent
	ctx       context.Context
	cancel    context.CancelCauseFunc // ends the request; call when done with it
}

// readErr describes a failed body read, naming a stall when the idle
// timeout ended the request.
func (r *response) readErr(err error) error {
	var sc *stallCause
	if c := context.Cause(r.ctx); errors.As(c, &sc) {
		return fmt.Errorf("%w: %s", ErrStalled, sc.what)
	}
	return err
}

func (d *downloader) get(ctx context.Context, from int64, validator string) (*response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	for k, vs := range d.opt.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if runtime.GOOS != "js" {
		// Transparent gzip would hide the real length and break ranges.
		req.Header.Set("Accept-Encoding", "identity")
	}
	if from > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
		if validator != "" {
			req.Header.Set("If-Range", validator)
		}
	}
	r := &response{linkedLen: -1}
	note := func(h http.Header) {
		if s := shaFromETag(h.Get("X-Linked-Etag")); s != "" {
			r.linkedSHA = s
		}
		if n, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			r.linkedLen = n
		}
	}
	client := *d.opt.Client
	orig := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.Response != nil {
			note(req.Response.Header)
		}
		if orig != nil {
			return orig(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	var timer *time.Timer
	if t := d.opt.HeaderTimeout; t > 0 {
		timer = time.AfterFunc(t, func() {
			cancel(&stallCause{"no response headers within " + seconds(t)})
		})
	}
	d.mu.Lock()
	d.lastByte = time.Now()
	d.mu.Unlock()
	resp, err := client.Do(req)
	if timer != nil {
		timer.Stop()
	}
	r.ctx, r.cancel = ctx, cancel
	if err != nil {
		err = r.readErr(err)
		cancel(nil)
		return nil, &retryable{err}
	}
	note(resp.Header)
	r.resp = resp
	return r, nil
}

// shaFromETag returns the lowercase sha256 hex in a strong ETag, or "".
func shaFromETag(etag string) string {
	if strings.HasPrefix(etag, "W/") {
		return ""
	}
	s := strings.ToLower(strings.Trim(etag, `"`))
	if isSHA256Hex(s) {
		return s
	}
	return ""
}

// validatorOf picks the If-Range validator: a strong ETag, else
// Last-Modified.
func validatorOf(h http.Header) string {
	if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
		return et
	}
	return h.Get("Last-Modified")
}

// parseContentRange parses "bytes start-end/total" (total may be "*").
func parseContentRange(s string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(a, 10, 64)
	end, err2 = strconv.ParseInt(b, 10, 64)
	total = -1
	if tot != "*" {
		total, err3 = strconv.ParseInt(tot, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end < start || (total >= 0 && end >= total) {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

func (d *downloader) attempt(ctx context.Context) (Result, error) {
	d.load()
	total0 := int64(-1)
	if d.opt.Size > 0 {
		total0 = d.opt.Size
	} else if d.sc != nil {
		total0 = d.sc.Size
	}
	d.resumed = d.off
	d.setProgress(d.off, total0, false)
	d.report(true)
	defer d.tick()()
	if d.off > 0 && d.sc.Validator == "" && d.opt.SHA256 == "" {
		// Without If-Range nothing stops the server from splicing a newer
		// version onto our prefix; only the caller's digest would catch it.
		d.discard()
	}
	var (
		r     *response
		total int64 = -1
	)
	for tries := 0; ; tries++ {
		if tries == 3 {
			return Result{}, errors.New("server keeps rejecting the resume request")
		}
		validator := ""
		if d.sc != nil {
			validator = d.sc.Validator
		}
		var err error
		r, err = d.get(ctx, d.off, validator)
		if err != nil {
			return Result{}, err
		}
		defer r.cancel(nil)
		resp := r.resp
		restart := func() {
			resp.Body.Close()
			d.discard()
		}
		switch code := resp.StatusCode; {
		case code == http.StatusPartialContent:
			start, _, tot, ok := parseContentRange(resp.Header.Get("Content-Range"))
			if d.off == 0 || !ok || start != d.off {
				restart()
				continue
			}
			if (d.sc.Size >= 0 && tot >= 0 && tot != d.sc.Size) ||
				(resp.Header.Get("ETag") != "" && strings.HasPrefix(d.sc.Validator, `"`) && resp.Header.Get("ETag") != d.sc.Validator) ||
				(r.linkedSHA != "" && d.opt.SHA256 == "" && d.sc.SHA256 != "" && r.linkedSHA != d.sc.SHA256) {
				restart() // the resource changed under us
				continue
			}
			total = tot
			if total < 0 {
				total = d.sc.Size
			}
		case code == http.StatusOK:
			// A fresh download, or the server ignored Range / If-Range
			// failed: this is the whole, possibly new, body. Forget what
			// the old sidecar said about it.
			if d.sc != nil {
				hackpadfs.Remove(d.fsys, d.side)
			}
			d.sc, d.off, d.h = nil, 0, sha256.New()
			if resp.ContentLength >= 0 && !resp.Uncompressed {
				total = resp.ContentLength
			}
		case code == http.StatusRequestedRangeNotSatisfiable && d.off > 0 && d.sc.Size == d.off:
			resp.Body.Close()
			resp.Body = http.NoBody
			total = d.off // everything is already here
		case code == http.StatusRequestedRangeNotSatisfiable && d.off > 0:
			restart()
			continue
		case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
			resp.Body.Close()
			return Result{}, &retryable{&HTTPError{StatusCode: code, Status: resp.Status}}
		default:
			resp.Body.Close()
			return Result{}, &HTTPError{StatusCode: code, Status: resp.Status}
		}
		break
	}
	resp := r.resp
	defer resp.Body.Close()

	// We asked for identity; a server that encodes anyway sends bytes that
	// are not the file. gzip is decoded (its length and ranges are those
	// of the encoded stream, so the size is unknown and there is no
	// resume); anything else is refused. In the browser fetch() decodes.
	var body io.Reader = resp.Body
	gzipped := false
	if enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); runtime.GOOS != "js" && resp.Body != http.NoBody && enc != "" && enc != "identity" {
		if enc != "gzip" && enc != "x-gzip" {
			d.discard()
			return Result{}, fmt.Errorf("%w %q (asked for identity)", ErrEncoding, enc)
		}
		if resp.StatusCode != http.StatusOK {
			// A gzip-encoded range cannot be appended to the part.
			d.discard()
			return Result{}, &retryable{fmt.Errorf("server sent a gzip-encoded partial response; starting over")}
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return Result{}, &retryable{fmt.Errorf("gzip-encoded body: %w", err)}
		}
		body, gzipped, total = zr, true, -1
	}

	// Reconcile every size claim before writing a byte.
	if r.linkedLen >= 0 {
		if total < 0 {
			total = r.linkedLen
		} else if total != r.linkedLen {
			d.discard()
			return Result{}, fmt.Errorf("%w: server sends %d bytes but X-Linked-Size says %d", ErrLength, total, r.linkedLen)
		}
	}
	if d.opt.Size > 0 {
		if total >= 0 && total != d.opt.Size {
			d.discard()
			return Result{}, fmt.Errorf("%w: expected %d bytes, server has %d", ErrLength, d.opt.Size, total)
		}
		total = d.opt.Size
	}
	serverSHA := r.linkedSHA
	if serverSHA == "" {
		serverSHA = shaFromETag(resp.Header.Get("ETag"))
	}
	if d.sc == nil {
		want := d.opt.SHA256
		if want == "" {
			want = serverSHA
		}
		validator := validatorOf(resp.Header)
		if gzipped {
			validator = "" // the part holds decoded bytes: never resume it by range
		}
		d.sc = &sidecar{Version: sidecarVersion, URL: d.url, Size: total, Validator: validator, SHA256: want}
	}
	if d.opt.Quota != nil && total >= 0 {
		if err := d.opt.Quota(total - d.off); err != nil {
			return Result{}, err
		}
	}
	d.resumed = d.off

	f, err := hackpadfs.OpenFile(d.fsys, d.part, hackpadfs.FlagReadWrite|hackpadfs.FlagCreate, 0o644)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	if err := hackpadfs.TruncateFile(f, d.off); err != nil {
		return Result{}, err
	}
	if _, err := hackpadfs.SeekFile(f, d.off, io.SeekStart); err != nil {
		return Result{}, err
	}
	if err := d.checkpoint(f, d.off); err != nil {
		return Result{}, err
	}

	done := d.off
	buf := make([]byte, 1<<20)
	nextCheckpoint := done + d.opt.CheckpointBytes
	lastCheckpoint := time.Now()
	d.setProgress(done, total, true)
	d.report(true)
	var idle *time.Timer
	if t := d.opt.IdleTimeout; t > 0 {
		idle = time.AfterFunc(t, func() {
			r.cancel(&stallCause{"no data for " + seconds(t)})
		})
		defer idle.Stop()
	}
	for {
		if idle != nil {
			idle.Reset(d.opt.IdleTimeout)
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			if total >= 0 && done+int64(n) > total {
				f.Close()
				f = nil
				d.discard()
				return Result{}, fmt.Errorf("%w: server sent more than the expected %d bytes", ErrLength, total)
			}
			if _, err := hackpadfs.WriteFile(f, buf[:n]); err != nil {
				d.checkpoint(f, done)
				return Result{}, err
			}
			d.h.Write(buf[:n])
			done += int64(n)
			d.fresh += int64(n)
			d.setProgress(done, total, true)
			d.report(false)
			if done >= nextCheckpoint || time.Since(lastCheckpoint) > 5*time.Second {
				lastCheckpoint = time.Now()
				if err := d.checkpoint(f, done); err != nil {
					return Result{}, err
				}
				nextCheckpoint = done + d.opt.CheckpointBytes
			}
		}
		if rerr == io.EOF {
			if idle != nil {
				idle.Stop()
			}
			break
		}
		if rerr != nil {
			rerr = r.readErr(rerr)
			d.checkpoint(f, done)
			if gzipped && !errors.Is(rerr, context.Canceled) && !errors.Is(rerr, context.DeadlineExceeded) {
				var ne net.Error
				if !errors.As(rerr, &ne) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
					d.discard() // a corrupt gzip stream: nothing in it can be trusted
					return Result{}, fmt.Errorf("gzip-encoded body after %d bytes: %w", done, rerr)
				}
			}
			return Result{}, &retryable{fmt.Errorf("after %d of %s bytes: %w", done, sizeString(total), rerr)}
		}
	}
	if total >= 0 && done < total {
		d.checkpoint(f, done)
		return Result{}, &retryable{fmt.Errorf("%w: connection ended after %d of %d bytes", io.ErrUnexpectedEOF, done, total)}
	}

	// Verify, then publish.
	got := hex.EncodeToString(d.h.Sum(nil))
	res := Result{Path: d.dst, Size: done, SHA256: got, Resumed: d.resumed}
	fail := func(err error) (Result, error) {
		f.Close()
		f = nil
		d.discard()
		if d.resumed > 0 {
			return Result{}, &restartError{fmt.Errorf("%w (%d bytes were resumed from an earlier attempt)", err, d.resumed)}
		}
		return Result{}, err
	}
	switch {
	case d.opt.SHA256 != "":
		if got != d.opt.SHA256 {
			return fail(fmt.Errorf("%w: expected sha256 %s, got %s (%d bytes)", ErrChecksum, d.opt.SHA256, got, done))
		}
		res.Verified = VerifiedSHA256
	case d.sc.SHA256 != "":
		if want := d.sc.SHA256; got != want {
			return fail(fmt.Errorf("%w: server advertised sha256 %s, got %s (%d bytes)", ErrChecksum, want, got, done))
		}
		res.Verified = VerifiedETag
	case total >= 0:
		res.Verified = VerifiedSize
	}
	if d.opt.Check != nil && res.Verified != VerifiedSHA256 {
		if err := hackpadfs.SyncFile(f); err != nil && !errors.Is(err, hackpadfs.ErrNotImplemented) {
			return Result{}, err
		}
		if err := d.opt.Check(fileReaderAt{f}, done); err != nil {
			return fail(fmt.Errorf("%w: %d bytes, sha256 %s: %v", ErrInvalid, done, got, err))
		}
		if res.Verified != VerifiedETag {
			res.Verified = VerifiedFormat
		}
	}
	if err := hackpadfs.SyncFile(f); err != nil && !errors.Is(err, hackpadfs.ErrNotImplemented) {
		return Result{}, err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return Result{}, err
	}
	if err := hackpadfs.Rename(d.fsys, d.part, d.dst); err != nil {
		return Result{}, err
	}
	hackpadfs.Remove(d.fsys, d.side)
	d.setProgress(done, total, true)
	d.report(true)
	return res, nil
}

// checkpoint makes the first done bytes of the part durable and records
// them in the sidecar, written via a temporary file and a rename so a crash
// never leaves a half-written sidecar.
func (d *downloader) checkpoint(f hackpadfs.File, done int64) error {
	if err := hackpadfs.SyncFile(f); err != nil && !errors.Is(err, hackpadfs.ErrNotImplemented) {
		return err
	}
	d.sc.Done = done
	tmp := d.side + ".tmp"
	if err := hackpadfs.WriteFullFile(d.fsys, tmp, d.sc.marshal(), 0o644); err != nil {
		return err
	}
	return hackpadfs.Rename(d.fsys, tmp, d.side)
}

// setProgress records the transfer's state for reports; got says bytes
// just arrived.
func (d *downloader) setProgress(done, total int64, got bool) {
	d.mu.Lock()
	d.curDone, d.curTotal, d.curFresh, d.curResumed = done, total, d.fresh, d.resumed
	if got || d.lastByte.IsZero() {
		d.lastByte = time.Now()
	}
	d.mu.Unlock()
}

// report calls Options.Progress with the current state, at most every
// ProgressInterval unless forced. Calls are serialized.
func (d *downloader) report(force bool) {
	if d.opt.Progress == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(d.last) < d.opt.ProgressInterval {
		return
	}
	d.last = now
	var rate float64
	if el := now.Sub(d.start).Seconds(); el > 0 {
		rate = float64(d.curFresh) / el
	}
	d.opt.Progress(Progress{Done: d.curDone, Total: d.curTotal, Rate: rate, Resumed: d.curResumed, Stalled: now.Sub(d.lastByte)})
}

// tick reports progress every ProgressInterval (at least every 250ms)
// while nothing else does, so a stall stays visible; it returns the stop
// function.
func (d *downloader) tick() func() {
	if d.opt.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(d.opt.ProgressInterval, 250*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d.report(false)
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// fileReaderAt reads a hackpadfs file at offsets, by seeking where the
// file has no ReadAt.
type fileReaderAt struct{ f hackpadfs.File }

func (r fileReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := hackpadfs.ReadAtFile(r.f, p, off)
	if !errors.Is(err, hackpadfs.ErrNotImplemented) {
		return n, err
	}
	if _, err := hackpadfs.SeekFile(r.f, off, io.SeekStart); err != nil {
		return 0, err
	}
	n, err = io.ReadFull(r.f, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

// seconds formats a timeout for a message: "30s", "0.25s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func sizeString(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

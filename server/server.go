package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Config tunes a Server. Zero values take the defaults noted.
type Config struct {
	Token        string   // bearer token; "" = none (loopback only, see CheckBind)
	AllowOrigins []string // extra websocket/CORS origins ("https://host:port", or "*")
	WebDir       string   // static files served at /; "" = none
	WebPage      fs.FS    // page sources served at / where WebDir lacks them (package web); nil = none

	MaxBodyBytes    int64         // HTTP request body limit; 0 = 4 MiB
	MaxMessageBytes int64         // websocket message limit; 0 = 1 MiB
	MaxActive       int           // concurrent generations in all; 0 = 64
	MaxPerConn      int           // concurrent generations per websocket connection; 0 = 8
	Slots           int           // generations a native model runs at once, the rest wait in order; 0 = no bound
	SendQueue       int           // messages queued per websocket connection; 0 = 1024
	WriteTimeout    time.Duration // a single write to a client; 0 = 10 s
	AuthTimeout     time.Duration // websocket auth message deadline; 0 = 10 s
	HeaderTimeout   time.Duration // reading a request's headers; 0 = 10 s
	BodyTimeout     time.Duration // reading a whole request body; 0 = 30 s
	MaxPreAuth      int           // connections not yet authenticated, in all; 0 = 256
	MaxPreAuthPerIP int           // the same from one remote address; 0 = 32
	PreAuthTimeout  time.Duration // a connection not authenticated by then is closed; 0 = 2 min
	PingInterval    time.Duration // websocket keepalive; 0 = 30 s
	WorkerTimeout   time.Duration // a browser worker's silence on a job before it fails; 0 = 2 min

	Loader Loader                           // enables "load" on the server itself; nil = refused
	Logf   func(format string, args ...any) // nil = log.Printf
}

// Server is the HTTP and websocket front end over a set of workers.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	metrics *metrics
	preAuth *connLimiter
	started time.Time

	mu       sync.Mutex
	workers  []worker // registration order: the first native one is the default
	nextID   int
	conns    map[*wsConn]struct{}
	httpSrvs []*http.Server

	active   atomic.Int64
	draining atomic.Bool

	imagesMu sync.Mutex
	images   []namedImageModel // POST /v1/images/generations; the first is the default

	genCtx    context.Context // cancelled (cause errShutdown) at shutdown
	genCancel context.CancelCauseFunc
	genWG     sync.WaitGroup
	connWG    sync.WaitGroup
}

// worker is a native model or a relayed browser tab.
type worker interface {
	info() WorkerInfo
	serves(model string) bool
	generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error)
	load(ctx context.Context, model string, progress func(Progress)) (WorkerInfo, error)
	close() error
}

var (
	errShutdown = errors.New("server shutting down")
	errBusy     = errors.New("too many concurrent generations")
	errSlow     = errors.New("client too slow: send queue full")
)

// apiError is an error with an HTTP status and OpenAI's type/code, used by
// both front ends.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// New returns a server with no workers; add models with AddModel.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 1 << 20
	}
	if cfg.MaxActive <= 0 {
		cfg.MaxActive = 64
	}
	if cfg.MaxPerConn <= 0 {
		cfg.MaxPerConn = 8
	}
	if cfg.SendQueue <= 0 {
		cfg.SendQueue = 1024
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = 10 * time.Second
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.MaxPreAuth <= 0 {
		cfg.MaxPreAuth = 256
	}
	if cfg.MaxPreAuthPerIP <= 0 {
		cfg.MaxPreAuthPerIP = 32
	}
	if cfg.PreAuthTimeout <= 0 {
		cfg.PreAuthTimeout = 2 * time.Minute
	}
	if cfg.WorkerTimeout <= 0 {
		cfg.WorkerTimeout = 2 * time.Minute
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	for _, o := range cfg.AllowOrigins {
		if _, ok := normOrigin(o); !ok && o != "*" {
			return nil, fmt.Errorf("server: allowed origin %q: want scheme://host[:port] or *", o)
		}
	}
	if cfg.WebDir != "" {
		if st, err := os.Stat(cfg.WebDir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("server: web directory %q is not a directory", cfg.WebDir)
		}
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), started: time.Now(), conns: map[*wsConn]struct{}{}}
	s.preAuth = newConnLimiter(cfg.MaxPreAuth, cfg.MaxPreAuthPerIP, cfg.PreAuthTimeout, s.metrics)
	s.genCtx, s.genCancel = context.WithCancelCause(context.Background())
	s.routes()
	return s, nil
}

// AddModel registers a native worker serving m under name; path (a file or
// directory, may be "") is what /models/<name>/ serves. The server closes m
// at Shutdown.
func (s *Server) AddModel(name, path string, m Model) WorkerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	name = s.uniqueNameLocked(name)
	w := &nativeWorker{id: fmt.Sprintf("native-%d", s.nextID), name: name, path: path, m: m, s: s}
	if s.cfg.Slots > 0 {
		w.slots = make(chan struct{}, s.cfg.Slots)
	}
	s.nextID++
	s.workers = append(s.workers, w)
	return w.info()
}

func (s *Server) uniqueNameLocked(name string) string {
	if name == "" {
		name = "model"
	}
	taken := func(n string) bool {
		for _, w := range s.workers {
			if nw, ok := w.(*nativeWorker); ok && nw.name == n {
				return true
			}
		}
		return false
	}
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		if n := fmt.Sprintf("%s-%d", name, i); !taken(n) {
			return n
		}
	}
}

// ModelName is the name a model at path is listed under: its file or
// directory base name without extension.
func ModelName(path string) string {
	b := filepath.Base(filepath.Clean(path))
	if b == "config.json" {
		b = filepath.Base(filepath.Dir(filepath.Clean(path)))
	}
	if ext := filepath.Ext(b); ext != "" && ext != b {
		b = strings.TrimSuffix(b, ext)
	}
	return b
}

func (s *Server) addWorker(w worker) {
	s.mu.Lock()
	s.workers = append(s.workers, w)
	s.mu.Unlock()
}

func (s *Server) removeWorker(w worker) {
	s.mu.Lock()
	s.workers = slices.DeleteFunc(s.workers, func(x worker) bool { return x == w })
	s.mu.Unlock()
}

func (s *Server) newWorkerID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("%s-%d", prefix, s.nextID)
	s.nextID++
	return id
}

// Workers lists the workers in registration order.
func (s *Server) Workers() []WorkerInfo {
	s.mu.Lock()
	ws := slices.Clone(s.workers)
	s.mu.Unlock()
	out := make([]WorkerInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.info())
	}
	return out
}

// pick chooses a worker: by id when workerID is set, else the first native
// worker serving model, else any worker serving it; model "" means the
// first native worker (or the first worker of any kind).
func (s *Server) pick(workerID, model string) (worker, *apiError) {
	s.mu.Lock()
	ws := slices.Clone(s.workers)
	s.mu.Unlock()
	if workerID != "" {
		for _, w := range ws {
			if w.info().ID == workerID {
				if model != "" && !w.serves(model) {
					return nil, &apiError{Status: 404, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
						Message: fmt.Sprintf("worker %q does not serve model %q", workerID, model)}
				}
				return w, nil
			}
		}
		return nil, &apiError{Status: 404, Type: "invalid_request_error", Param: "worker", Code: "worker_not_found",
			Message: fmt.Sprintf("the worker %q does not exist", workerID)}
	}
	// Native workers first; among workers of a kind, the least busy (the
	// first on ties, so a single-model server is deterministic).
	for _, kind := range []string{"native", "browser"} {
		var best worker
		bestActive := 0
		for _, w := range ws {
			wi := w.info()
			if wi.Kind != kind {
				continue
			}
			if model == "" && kind == "native" {
				return w, nil // the first model is the default
			}
			if (model == "" && len(wi.Models) > 0) || (model != "" && w.serves(model)) {
				if best == nil || wi.Active < bestActive {
					best, bestActive = w, wi.Active
				}
			}
		}
		if best != nil {
			return best, nil
		}
	}
	if model == "" {
		return nil, &apiError{Status: 404, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: "no model is loaded"}
	}
	return nil, &apiError{Status: 404, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model '%s' does not exist", model)}
}

// run is the single admission path of every generation: it enforces the
// global limit, ties the generation to the server's shutdown, and records
// metrics. ctx is the client's; cancelling it cancels the generation.
func (s *Server) run(ctx context.Context, w worker, req GenRequest, onToken func(Token) error) (*Result, error) {
	// Admission under s.mu: Shutdown sets draining under it too, so no
	// generation joins genWG after Shutdown has started waiting on it.
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		return nil, &apiError{Status: 503, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"}
	}
	if n := s.active.Add(1); n > int64(s.cfg.MaxActive) {
		s.active.Add(-1)
		s.mu.Unlock()
		s.metrics.rejected.Add(1)
		return nil, &apiError{Status: 429, Type: "rate_limit_exceeded", Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("%v (limit %d): retry later", errBusy, s.cfg.MaxActive)}
	}
	s.genWG.Add(1)
	s.mu.Unlock()
	defer func() {
		s.active.Add(-1)
		s.genWG.Done()
	}()
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.genCtx, func() { cancel(errShutdown) })
	defer stop()

	start := time.Now()
	var ttft time.Duration
	ntok := 0
	res, err := w.generate(gctx, req, func(t Token) error {
		if ntok == 0 {
			ttft = time.Since(start)
			s.metrics.ttft.observe(ttft.Seconds())
		}
		ntok++
		s.metrics.tokens.Add(1)
		return onToken(t)
	})
	total := time.Since(start)
	s.metrics.latency.observe(total.Seconds())
	shut := errors.Is(context.Cause(gctx), errShutdown)
	if err != nil {
		if gctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || shut) {
			// A cancelled generation still ends with a result: the front
			// end owes its client a final event.
			res, err = &Result{FinishReason: "cancelled"}, nil
		} else {
			return nil, err
		}
	}
	if shut && (res.FinishReason == "cancelled" || res.FinishReason == "") {
		res.FinishReason = "shutdown"
	}
	if res.FinishReason == "" {
		res.FinishReason = "length"
	}
	s.metrics.promptTokens.Add(int64(res.PromptTokens))
	s.metrics.finished(res.FinishReason)
	s.metrics.spec(res)
	s.metrics.cachedTokens.Add(int64(res.CachedTokens))
	res.TTFTMs = float64(ttft.Microseconds()) / 1e3
	res.TotalMs = float64(total.Microseconds()) / 1e3
	res.Worker = w.info().ID
	return res, nil
}

// ---- HTTP plumbing ----

func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.Handle("GET /metrics", s.authed(http.HandlerFunc(s.handleMetrics)))
	mux.Handle("GET /v1/models", s.api("models", s.handleModels))
	mux.Handle("POST /v1/completions", s.api("completions", s.handleCompletions))
	mux.Handle("POST /v1/chat/completions", s.api("chat_completions", s.handleChat))
	mux.Handle("POST /v1/images/generations", s.api("images_generations", s.handleImages))
	mux.Handle("OPTIONS /v1/", http.HandlerFunc(s.handlePreflight))
	mux.HandleFunc("GET /v1/ws", s.handleWS)
	mux.Handle("GET /models/{name}/{file...}", s.authed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.cors(w, r)
		s.handleModelFile(w, r)
	})))
	mux.Handle("OPTIONS /models/", http.HandlerFunc(s.handlePreflight))
	if s.cfg.WebDir != "" || s.cfg.WebPage != nil {
		mux.Handle("GET /", s.webHandler())
	}
	s.mux = mux
}

// Handler is the server's root handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveRoot) }

// serveRoot guards a tokenless server against DNS rebinding: a page on a
// foreign site whose name now resolves to 127.0.0.1 would pass the
// same-host Origin check, so without a token only loopback Host names are
// served.
func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" && !loopbackHost(r.Host) {
		http.Error(w, "this server has no token and answers only to a loopback Host (localhost, 127.0.0.1, [::1]); start it with --token to serve other names", http.StatusMisdirectedRequest)
		return
	}
	// A page of another origin may not use the server at all: browsers
	// send "simple" cross-origin POSTs without asking first, so CORS
	// headers alone would not stop one from running a generation.
	if !s.originAllowed(r) {
		http.Error(w, fmt.Sprintf("origin %q is not allowed: only the server's own origin and those given with --allow-origin", r.Header.Get("Origin")), http.StatusForbidden)
		return
	}
	// A body (declared or chunked) must arrive within BodyTimeout, whether
	// or not the handler reads it (net/http drains what it leaves); a
	// handler that reads it all lifts the deadline (readBody), so a long
	// response is not cut.
	if r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	}
	if s.checkToken(r) {
		connAuthenticated(r)
	} else {
		// Without the token, a connection serves one request: it cannot
		// idle on keep-alive (a websocket authenticates by message later).
		w.Header().Set("Connection", "close")
	}
	s.mux.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// api wraps an OpenAI endpoint: auth, CORS, body limit, request metrics.
func (s *Server) api(name string, h func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		defer func() { s.metrics.request(name, rec.status) }()
		s.cors(rec, r)
		if !s.checkToken(r) {
			writeError(rec, &apiError{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "missing or incorrect API key: send Authorization: Bearer <token>"})
			return
		}
		if r.Method == http.MethodPost && !isJSON(r.Header.Get("Content-Type")) {
			writeError(rec, &apiError{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
				Message: fmt.Sprintf("Content-Type %q: send application/json", r.Header.Get("Content-Type"))})
			return
		}
		r.Body = http.MaxBytesReader(rec, r.Body, s.cfg.MaxBodyBytes)
		h(rec, r)
	})
}

// isJSON reports whether a Content-Type is JSON (application/json, with
// any parameters such as charset).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func (s *Server) authed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.checkToken(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// bearer extracts the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) < len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}

func (s *Server) checkToken(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	t, ok := bearer(r)
	return ok && s.tokenOK(t)
}

// originAllowed: no Origin (not a browser) passes; a browser's Origin must
// be the server's own origin (scheme, host and port: http, or https when
// the request came over TLS, and the request's Host) or in the
// allow-list.
func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	origin, ok := normOrigin(o)
	if !ok {
		return false
	}
	for _, a := range s.cfg.AllowOrigins {
		if a == "*" {
			return true
		}
		if na, ok := normOrigin(a); ok && na == origin {
			return true
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own, ok := normOrigin(scheme + "://" + r.Host)
	return ok && own == origin
}

// normOrigin is an origin (scheme://host[:port], a trailing slash
// allowed) in one spelling: lower case, the scheme's default port
// explicit. ok is false for anything else (a path, "null", no host).
func normOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(o, "/")) // url.Parse lowers the scheme
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

func (s *Server) cors(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && s.originAllowed(r) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Range, If-None-Match, If-Range")
		h.Set("Access-Control-Expose-Headers", "ETag, Content-Range, Accept-Ranges, Content-Length")
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Add("Vary", "Origin")
	}
}

func (s *Server) handlePreflight(w http.ResponseWriter, r *http.Request) {
	s.cors(w, r)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	status := "ok"
	if s.draining.Load() {
		status = "shutting_down"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, `{"status":%q,"active":%d}`+"\n", status, s.active.Load())
}

// CheckBind refuses a listen address off the loopback interface unless a
// token protects the server.
func CheckBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("server: address %q: %w", addr, err)
	}
	if token != "" {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if host == "" {
		host = "all interfaces"
	}
	return fmt.Errorf("server: refusing to listen on %s (%s) without a token: anyone who can reach it could use it; pass --token (or bind 127.0.0.1)", addr, host)
}

// ListenAndServe checks addr with CheckBind, listens and serves until
// Shutdown. It returns http.ErrServerClosed after a graceful shutdown.
func (s *Server) ListenAndServe(addr string) error {
	if err := CheckBind(addr, s.cfg.Token); err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return s.Serve(l)
}

// Serve serves on l until Shutdown. It does not check the address: callers
// that listen themselves must call CheckBind.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ConnContext:       withConn,
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(logWriter{s.cfg.Logf}, "", 0),
	}
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	s.httpSrvs = append(s.httpSrvs, hs)
	s.mu.Unlock()
	return hs.Serve(&limitListener{Listener: l, lim: s.preAuth})
}

type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Shutdown stops accepting, ends every in-flight generation with a final
// event (finish_reason "shutdown"), closes the websocket connections and
// the models, and returns when all of it is done or ctx expires.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		return errors.New("server: already shut down")
	}
	s.draining.Store(true)
	srvs := slices.Clone(s.httpSrvs)
	s.mu.Unlock()
	// Stop the listeners first (Shutdown closes them at once, then waits
	// for handlers, which the cancelled generations let finish).
	errc := make(chan error, len(srvs))
	for _, hs := range srvs {
		go func() { errc <- hs.Shutdown(ctx) }()
	}
	s.genCancel(errShutdown)
	var errs []error
	if err := waitCtx(ctx, &s.genWG); err != nil {
		errs = append(errs, fmt.Errorf("server: generations still running: %w", err))
	}
	s.mu.Lock()
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeGracefully(websocket.CloseGoingAway, "server shutting down")
	}
	if err := waitCtx(ctx, &s.connWG); err != nil {
		for _, c := range conns {
			c.close(errShutdown)
		}
		errs = append(errs, fmt.Errorf("server: websocket connections still open: %w", err))
	}
	for range srvs {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	ws := slices.Clone(s.workers)
	s.workers = nil
	s.mu.Unlock()
	for _, w := range ws {
		if err := w.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

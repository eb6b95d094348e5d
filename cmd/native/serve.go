package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/server"
	"github.com/cortiq/cortiq/web"
)

func init() {
	register("serve", "serve [-m MODEL]... [--addr HOST:PORT] [--token T] [flags]", "OpenAI-compatible HTTP API and websocket remote control", cmdServe)
}

func cmdServe(args []string) error {
	fs := newFlags("serve")
	var mf modelFlags
	var spf specFlags
	mf.register(fs)
	spf.register(fs)
	// -m is repeatable here: every model is served under its base name.
	var models multiFlag
	mflag := fs.Lookup("m")
	mflag.Value = &models
	mflag.DefValue = ""
	mflag.Usage = "model (repeatable): a path (HF directory, .gguf, .cmf) or a name (default " + resolve.DefaultModel + ")"
	addr := fs.String("addr", "127.0.0.1:8080", "listen address; anything but loopback needs --token")
	token := fs.String("token", os.Getenv("CORTIQ_TOKEN"), "bearer token clients must send (default $CORTIQ_TOKEN)")
	var origins multiFlag
	fs.Var(&origins, "allow-origin", "extra browser origin allowed on the websocket and CORS, e.g. https://host:port (repeatable; * = any)")
	webDir := fs.String("web", "", "directory with the browser bundle `make wasm` builds (cortiq.wasm, wasm_exec.js) and page overrides (default ./web when it exists; the page itself is built in)")
	maxActive := fs.Int("max-active", 64, "concurrent generations in all")
	maxPerConn := fs.Int("max-per-conn", 8, "concurrent generations per websocket connection")
	slots := fs.Int("slots", 0, "generations each model runs at once, the others wait in order (0 = no bound)")
	allowLoad := fs.Bool("allow-load", true, "let authenticated websocket clients load more models on this server")
	workerTimeout := fs.Duration("worker-timeout", 2*time.Minute, "how long a browser worker may stay silent on a job before it fails")
	promptCache := fs.String("prompt-cache", "1GiB", "bytes of finished sessions kept per model, so a request sharing a prefix prefills only the rest (0 = off)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := spf.prepare(&mf); err != nil {
		return err
	}
	var err error
	if mf.prefixCache, err = parseBytes(*promptCache); err != nil {
		return fmt.Errorf("--prompt-cache: %w", err)
	}
	// Refuse an unsafe address before spending time on models.
	if err := server.CheckBind(*addr, *token); err != nil {
		return err
	}
	if *webDir == "" {
		if st, err := os.Stat("web"); err == nil && st.IsDir() {
			*webDir = "web"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	load := func(ctx context.Context, nameOrPath string, progress func(server.Progress)) (server.Model, string, string, error) {
		progress(server.Progress{Stage: "resolving"})
		path, err := newResolver().Resolve(ctx, nameOrPath)
		if err != nil {
			return nil, "", "", err
		}
		progress(server.Progress{Stage: "loading"})
		one := mf
		one.model = path
		e, err := one.load(ctx)
		if err != nil {
			return nil, "", "", err
		}
		// Every model served speculates as the flags say (--draft
		// against each one's vocabulary).
		closeDraft, err := spf.attach(ctx, mf, e)
		if err != nil {
			e.Close()
			return nil, "", "", err
		}
		progress(server.Progress{Stage: "ready"})
		return withDraft{server.FromEngine(e), closeDraft}, server.ModelName(path), path, nil
	}
	cfg := server.Config{
		Token: *token, AllowOrigins: origins, WebDir: *webDir, WebPage: web.Page, MaxActive: *maxActive, MaxPerConn: *maxPerConn,
		Slots: *slots, WorkerTimeout: *workerTimeout,
	}
	if *allowLoad {
		cfg.Loader = load
	}
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	if len(models) == 0 {
		models = multiFlag{""}
	}
	var names []string
	for _, m := range models {
		if diffusion.IsPipeline(m) {
			// A diffusers directory or pipeline CMF: an image model
			// (POST /v1/images/generations, the websocket "imagine" job).
			p, err := diffusion.Open(m, diffusion.OpenOptions{})
			if err != nil {
				s.Shutdown(context.Background())
				return err
			}
			defer p.Close()
			// Its transformer blocks, VAE decoder and text encoder on the
			// GPU as cortiq imagine puts them (--backend webgpu insists,
			// auto falls back to the CPU and says why).
			ib := "auto"
			if mf.backend == "cpu" || mf.backend == "webgpu" {
				ib = mf.backend
			}
			where, release, err := imagineDevice(p, ib, p.DiTQuant)
			if err != nil {
				s.Shutdown(context.Background())
				return err
			}
			defer release()
			name := s.AddImageModel(server.ModelName(m), server.FromPipeline(p))
			names = append(names, fmt.Sprintf("%s (images: %s; %s)", name, where, m))
			continue
		}
		mdl, name, path, err := load(ctx, m, func(server.Progress) {})
		if err != nil {
			s.Shutdown(context.Background())
			return err
		}
		info := s.AddModel(name, path, mdl)
		names = append(names, fmt.Sprintf("%s (%s, %s)", info.Models[0], info.Backend, path))
	}
	errc := make(chan error, 1)
	go func() { errc <- s.ListenAndServe(*addr) }()
	fmt.Fprintf(os.Stderr, "cortiq serve: http://%s/v1 — models: %s\n", *addr, strings.Join(names, ", "))
	if *token == "" {
		fmt.Fprintln(os.Stderr, "cortiq serve: no token: loopback clients only")
	}
	if *webDir == "" {
		fmt.Fprintln(os.Stderr, "cortiq serve: no ./web here and no --web: the page is served without the engine bundle; run `make wasm` in the repository and pass --web REPO/web (or start from the repository root)")
	} else if _, err := os.Stat(filepath.Join(*webDir, "cortiq.wasm")); err != nil {
		fmt.Fprintf(os.Stderr, "cortiq serve: %s has no cortiq.wasm: run `make wasm` for the browser page (it will say so too)\n", *webDir)
	}
	select {
	case err := <-errc:
		s.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}
	stop()
	fmt.Fprintln(os.Stderr, "cortiq serve: shutting down (a second signal exits at once)")
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		os.Exit(1)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = s.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// withDraft closes a served model's draft with it.
type withDraft struct {
	server.Model
	closeDraft func()
}

func (m withDraft) Close() error {
	err := m.Model.Close()
	m.closeDraft()
	return err
}

package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortiq/cortiq/diffusion"
)

// ImageModel makes images from prompts (POST /v1/images/generations).
type ImageModel interface {
	// Generate returns one PNG. progress, when not nil, is called after
	// each denoising step.
	Generate(ctx context.Context, req ImageRequest, progress func(step, steps int)) ([]byte, error)
}

// ImageRequest is one image's settings.
type ImageRequest struct {
	Prompt, Negative string
	Width, Height    int
	Steps            int
	Seed             uint64
	Guidance         float32
}

// ImageError is an error an ImageModel blames on the request (a 400).
type ImageError struct{ Err error }

func (e *ImageError) Error() string { return e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }

// AddImageModel serves an image model under name (made unique among the
// image models).
func (s *Server) AddImageModel(name string, m ImageModel) string {
	s.imagesMu.Lock()
	defer s.imagesMu.Unlock()
	base := name
	if base == "" {
		base = "image"
	}
	name = base
	for i := 2; s.imageModelLocked(name) != nil; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	s.images = append(s.images, namedImageModel{name, m})
	return name
}

type namedImageModel struct {
	name string
	m    ImageModel
}

func (s *Server) imageModelLocked(name string) ImageModel {
	for _, im := range s.images {
		if im.name == name {
			return im.m
		}
	}
	return nil
}

// imageBody is OpenAI's image request plus cortiq's extensions (steps,
// seed, guidance_scale, negative_prompt).
type imageBody struct {
	Model          string   `json:"model"`
	Prompt         *string  `json:"prompt"`
	N              *int     `json:"n"`
	Size           string   `json:"size"`
	ResponseFormat string   `json:"response_format"`
	Steps          *int     `json:"steps"`
	Seed           *uint64  `json:"seed"`
	Guidance       *float64 `json:"guidance_scale"`
	Negative       string   `json:"negative_prompt"`
	User           string   `json:"user"`
}

// maxImageN bounds n: images of one request run one after another.
const maxImageN = 4

func (s *Server) handleImages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, &apiError{Status: 413, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)})
			return
		}
		writeError(w, badRequest("", "reading the body: %v", err))
		return
	}
	var b imageBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		writeError(w, badRequest("", "invalid JSON body: %v", err))
		return
	}
	if b.Prompt == nil {
		writeError(w, badRequest("prompt", "prompt is required"))
		return
	}
	n := 1
	if b.N != nil {
		n = *b.N
	}
	if n < 1 || n > maxImageN {
		writeError(w, badRequest("n", "n must be between 1 and %d", maxImageN))
		return
	}
	if f := b.ResponseFormat; f != "" && f != "b64_json" {
		writeError(w, badRequest("response_format", "response_format %q: only b64_json (this server keeps no image URLs)", f))
		return
	}
	seed := uint64(time.Now().UnixNano())
	if b.Seed != nil {
		seed = *b.Seed
	}
	req, aerr := imageRequest(*b.Prompt, b.Negative, b.Size, b.Steps, b.Guidance, seed)
	if aerr != nil {
		writeError(w, aerr)
		return
	}

	m, aerr := s.pickImageModel(b.Model)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if s.draining.Load() {
		writeError(w, &apiError{Status: 503, Type: "server_error", Message: errShutdown.Error()})
		return
	}
	if s.active.Add(1) > int64(s.cfg.MaxActive) {
		s.active.Add(-1)
		writeError(w, &apiError{Status: 429, Type: "rate_limit_error", Message: errBusy.Error()})
		return
	}
	defer s.active.Add(-1)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.genCtx, func() { cancel(errShutdown) })
	defer stop()

	type item struct {
		B64 string `json:"b64_json"`
	}
	out := make([]item, 0, n)
	for i := range n {
		one := req
		one.Seed += uint64(i)
		png, err := m.Generate(ctx, one, nil)
		if err != nil {
			writeError(w, imageAPIError(ctx, err))
			return
		}
		out = append(out, item{base64.StdEncoding.EncodeToString(png)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"created": time.Now().Unix(), "data": out})
}

// imageRequest validates one image's settings (shared by the HTTP
// endpoint and the websocket "imagine" job).
func imageRequest(prompt, negative, size string, steps *int, guidance *float64, seed uint64) (ImageRequest, *apiError) {
	req := ImageRequest{Prompt: prompt, Negative: negative, Width: 1024, Height: 1024, Steps: 8, Seed: seed}
	if size != "" && size != "auto" {
		ws, hs, ok := strings.Cut(size, "x")
		wd, e1 := strconv.Atoi(ws)
		ht, e2 := strconv.Atoi(hs)
		if !ok || e1 != nil || e2 != nil || wd <= 0 || ht <= 0 || wd > 8192 || ht > 8192 {
			return req, badRequest("size", "size %q: want WIDTHxHEIGHT, e.g. 1024x1024", size)
		}
		req.Width, req.Height = wd, ht
	}
	if steps != nil {
		if *steps < 1 || *steps > 200 {
			return req, badRequest("steps", "steps must be between 1 and 200")
		}
		req.Steps = *steps
	}
	if guidance != nil {
		if *guidance < 0 || *guidance > 100 {
			return req, badRequest("guidance_scale", "guidance_scale must be between 0 and 100")
		}
		req.Guidance = float32(*guidance)
	}
	return req, nil
}

// pickImageModel finds an image model by name ("" = the first).
func (s *Server) pickImageModel(name string) (ImageModel, *apiError) {
	s.imagesMu.Lock()
	defer s.imagesMu.Unlock()
	var m ImageModel
	if name == "" && len(s.images) > 0 {
		m = s.images[0].m
	} else {
		m = s.imageModelLocked(name)
	}
	if m == nil {
		return nil, &apiError{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("no image model %q on this server", name)}
	}
	return m, nil
}

// imageAPIError classifies a generation's error.
func imageAPIError(ctx context.Context, err error) *apiError {
	var ie *ImageError
	switch {
	case errors.As(err, &ie):
		return badRequest("", "%v", ie.Err)
	case ctx.Err() != nil:
		return &apiError{Status: 503, Type: "server_error", Code: "cancelled", Message: context.Cause(ctx).Error()}
	default:
		return &apiError{Status: 500, Type: "server_error", Message: err.Error()}
	}
}

// ImageEvent is the websocket "image" event: one finished picture.
type ImageEvent struct {
	B64PNG  string  `json:"b64_png"`
	Width   int     `json:"width"`
	Height  int     `json:"height"`
	Steps   int     `json:"steps"`
	Seed    uint64  `json:"seed"`
	TotalMs float64 `json:"total_ms"`
}

// imagine runs a websocket image job: "progress" events with stage "step"
// after each denoising step, then one "image" or "error"; "cancel" with
// its id ends it.
func (c *wsConn) imagine(m *Msg) {
	if m.ID == "" {
		c.sendMsg(errMsg("", "bad_message", "imagine needs an id"))
		return
	}
	req, aerr := imageRequest(m.Prompt, m.Negative, m.Size, m.Steps, m.Guidance, m.Seed)
	if aerr != nil {
		c.sendMsg(errMsgFrom(m.ID, aerr))
		return
	}
	im, aerr := c.s.pickImageModel(m.Model)
	if aerr != nil {
		c.sendMsg(errMsgFrom(m.ID, aerr))
		return
	}
	c.mu.Lock()
	if _, dup := c.gens[m.ID]; dup {
		c.mu.Unlock()
		c.sendMsg(errMsg(m.ID, "duplicate_id", "a job with id %q is already running on this connection", m.ID))
		return
	}
	if len(c.gens) >= c.s.cfg.MaxPerConn {
		c.mu.Unlock()
		c.sendMsg(errMsg(m.ID, "rate_limit_exceeded", "at most %d concurrent jobs per connection", c.s.cfg.MaxPerConn))
		return
	}
	gctx, cancel := context.WithCancelCause(c.ctx)
	c.gens[m.ID] = func() { cancel(errors.New("cancelled")) }
	c.wg.Add(1)
	c.mu.Unlock()
	id := m.ID
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.gens, id)
			c.mu.Unlock()
			cancel(nil)
		}()
		if c.s.active.Add(1) > int64(c.s.cfg.MaxActive) {
			c.s.active.Add(-1)
			c.sendMsg(errMsg(id, "rate_limit_exceeded", "%v", errBusy))
			return
		}
		defer c.s.active.Add(-1)
		stop := context.AfterFunc(c.s.genCtx, func() { cancel(errShutdown) })
		defer stop()
		t0 := time.Now()
		png, err := im.Generate(gctx, req, func(step, steps int) {
			c.sendMsg(&Msg{Type: "progress", ID: id, Progress: &Progress{Stage: "step", Step: step, Steps: steps}})
		})
		if err != nil {
			c.sendMsg(errMsgFrom(id, imageAPIError(gctx, err)))
			return
		}
		c.sendMsg(&Msg{Type: "image", ID: id, Image: &ImageEvent{B64PNG: base64.StdEncoding.EncodeToString(png),
			Width: req.Width, Height: req.Height, Steps: req.Steps, Seed: req.Seed,
			TotalMs: float64(time.Since(t0).Microseconds()) / 1e3}})
	}()
}

// FromPipeline serves a diffusion pipeline, one image at a time.
func FromPipeline(p *diffusion.Pipeline) ImageModel { return &pipelineModel{p: p} }

type pipelineModel struct {
	mu sync.Mutex
	p  *diffusion.Pipeline
}

func (m *pipelineModel) Generate(ctx context.Context, req ImageRequest, progress func(step, steps int)) ([]byte, error) {
	if err := m.p.CheckSize(req.Width, req.Height); err != nil {
		return nil, &ImageError{err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.p.Generate(diffusion.Options{Prompt: req.Prompt, Negative: req.Negative, Width: req.Width,
		Height: req.Height, Steps: req.Steps, Seed: req.Seed, Guidance: req.Guidance, Progress: progress, Context: ctx})
	if err != nil {
		if errors.Is(err, diffusion.ErrPromptTooLong) {
			return nil, &ImageError{err}
		}
		return nil, err
	}
	var buf bytes.Buffer
	if err := diffusion.EncodePNG(&buf, res.Image, res.Width, res.Height); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

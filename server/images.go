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
	req := ImageRequest{Prompt: *b.Prompt, Negative: b.Negative, Width: 1024, Height: 1024, Steps: 8}
	if b.Size != "" && b.Size != "auto" {
		ws, hs, ok := strings.Cut(b.Size, "x")
		wd, e1 := strconv.Atoi(ws)
		ht, e2 := strconv.Atoi(hs)
		if !ok || e1 != nil || e2 != nil || wd <= 0 || ht <= 0 || wd > 8192 || ht > 8192 {
			writeError(w, badRequest("size", "size %q: want WIDTHxHEIGHT, e.g. 1024x1024", b.Size))
			return
		}
		req.Width, req.Height = wd, ht
	}
	if b.Steps != nil {
		if *b.Steps < 1 || *b.Steps > 200 {
			writeError(w, badRequest("steps", "steps must be between 1 and 200"))
			return
		}
		req.Steps = *b.Steps
	}
	if b.Guidance != nil {
		if *b.Guidance < 0 || *b.Guidance > 100 {
			writeError(w, badRequest("guidance_scale", "guidance_scale must be between 0 and 100"))
			return
		}
		req.Guidance = float32(*b.Guidance)
	}
	if b.Seed != nil {
		req.Seed = *b.Seed
	} else {
		req.Seed = uint64(time.Now().UnixNano())
	}

	s.imagesMu.Lock()
	var m ImageModel
	if b.Model == "" && len(s.images) > 0 {
		m = s.images[0].m
	} else {
		m = s.imageModelLocked(b.Model)
	}
	s.imagesMu.Unlock()
	if m == nil {
		writeError(w, &apiError{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("no image model %q on this server", b.Model)})
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
			var ie *ImageError
			switch {
			case errors.As(err, &ie):
				writeError(w, badRequest("", "%v", ie.Err))
			case ctx.Err() != nil:
				writeError(w, &apiError{Status: 503, Type: "server_error", Message: context.Cause(ctx).Error()})
			default:
				writeError(w, &apiError{Status: 500, Type: "server_error", Message: err.Error()})
			}
			return
		}
		out = append(out, item{base64.StdEncoding.EncodeToString(png)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"created": time.Now().Unix(), "data": out})
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

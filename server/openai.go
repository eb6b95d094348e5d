package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/cortiq/cortiq/sample"
)

// openAIRequest is the union of /v1/completions and /v1/chat/completions
// bodies; unknown fields are ignored, as OpenAI-compatible servers do.
type openAIRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	RepetitionPenalty   *float64        `json:"repetition_penalty"`
	RepeatPenalty       *float64        `json:"repeat_penalty"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	RepeatLastN         *int            `json:"repeat_last_n"`
	Seed                *int64          `json:"seed"`
	N                   *int            `json:"n"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool            `json:"ignore_eos"`
	Tools     json.RawMessage `json:"tools"`
	Echo      bool            `json:"echo"`
}

// decoded is an OpenAI request turned into a generation.
type decoded struct {
	model        string
	gen          GenRequest
	stream       bool
	includeUsage bool
}

const (
	maxStops    = 16
	maxMessages = 4096
)

// decodeOpenAI parses and validates a request body; chat selects the chat
// endpoint's rules (messages) over the completions endpoint's (prompt).
func decodeOpenAI(body []byte, chat bool) (*decoded, *apiError) {
	var req openAIRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("", "the body is not a valid JSON request: %v", err)
	}
	if dec.More() {
		return nil, badRequest("", "the body holds more than one JSON value")
	}
	d := &decoded{model: req.Model, stream: req.Stream}
	if req.StreamOptions != nil {
		d.includeUsage = req.StreamOptions.IncludeUsage
	}
	if req.N != nil && *req.N != 1 {
		return nil, badRequest("n", "n=%d is not supported: only n=1", *req.N)
	}
	if len(req.Tools) > 0 && !isNull(req.Tools) {
		return nil, badRequest("tools", "tools are not supported")
	}
	if req.Echo {
		return nil, badRequest("echo", "echo is not supported")
	}
	g := &d.gen
	g.IgnoreEOS = req.IgnoreEOS
	if chat {
		if len(req.Messages) == 0 || isNull(req.Messages) {
			return nil, badRequest("messages", "messages is required")
		}
		msgs, err := decodeMessages(req.Messages)
		if err != nil {
			return nil, err
		}
		g.Messages = msgs
	} else {
		if err := decodePrompt(req.Prompt, g); err != nil {
			return nil, err
		}
	}
	// max_tokens: completions default to OpenAI's 16; chat runs to the end
	// of the context (0 = the engine's remainder).
	if !chat {
		g.MaxTokens = 16
	}
	for _, v := range []struct {
		p    *int
		name string
	}{{req.MaxTokens, "max_tokens"}, {req.MaxCompletionTokens, "max_completion_tokens"}} {
		if v.p != nil {
			if *v.p < 0 {
				return nil, badRequest(v.name, "%s must be >= 0, got %d", v.name, *v.p)
			}
			g.MaxTokens = *v.p
		}
	}
	stops, err := decodeStop(req.Stop)
	if err != nil {
		return nil, err
	}
	g.Stop = stops

	// OpenAI's defaults: temperature 1, top_p 1, everything else off.
	p := sample.Params{Temperature: 1, RepeatLastN: 64}
	// Ranges are checked on the request as a whole (validateGen), the
	// same for the websocket.
	for _, f := range []struct {
		v   *float64
		dst *float32
	}{
		{req.Temperature, &p.Temperature}, {req.TopP, &p.TopP}, {req.MinP, &p.MinP},
		{req.RepeatPenalty, &p.RepeatPenalty}, {req.RepetitionPenalty, &p.RepeatPenalty},
		{req.PresencePenalty, &p.PresencePenalty}, {req.FrequencyPenalty, &p.FrequencyPenalty},
	} {
		if f.v != nil {
			*f.dst = float32(*f.v)
		}
	}
	if req.TopK != nil {
		p.TopK = *req.TopK
	}
	if req.RepeatLastN != nil {
		p.RepeatLastN = *req.RepeatLastN
	}
	if req.Seed != nil {
		p.Seed = uint64(*req.Seed)
	} else {
		p.Seed = uint64(time.Now().UnixNano())
	}
	g.Sampling = p
	if err := validateGen(g); err != nil {
		return nil, err
	}
	return d, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// decodePrompt accepts OpenAI's prompt forms: a string, a one-element list
// of strings, a list of token ids, or a one-element list of such lists.
func decodePrompt(raw json.RawMessage, g *GenRequest) *apiError {
	if len(raw) == 0 || isNull(raw) {
		return badRequest("prompt", "prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		g.Prompt = s
		return nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return badRequest("prompt", "prompt is an empty list")
		}
		g.IDs = ids
		return nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) != 1 {
			return badRequest("prompt", "a list of %d prompts is not supported: send one", len(strs))
		}
		g.Prompt = strs[0]
		return nil
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) == nil {
		if len(lists) != 1 || len(lists[0]) == 0 {
			return badRequest("prompt", "a list of %d token lists is not supported: send one non-empty list", len(lists))
		}
		g.IDs = lists[0]
		return nil
	}
	return badRequest("prompt", "prompt must be a string, a list of token ids, or a one-element list of either")
}

func decodeStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "stop must be a string or a list of strings")
	}
	if len(list) > maxStops {
		return nil, badRequest("stop", "at most %d stop strings, got %d", maxStops, len(list))
	}
	return list, nil
}

// decodeMessages accepts content as a string or as a list of parts of
// which only "text" parts are supported.
func decodeMessages(raw json.RawMessage) ([]ChatMessage, *apiError) {
	var in []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("messages", "messages must be a list of {role, content}: %v", err)
	}
	if len(in) == 0 {
		return nil, badRequest("messages", "messages is empty")
	}
	if len(in) > maxMessages {
		return nil, badRequest("messages", "at most %d messages, got %d", maxMessages, len(in))
	}
	out := make([]ChatMessage, 0, len(in))
	for i, m := range in {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer":
			m.Role = "system"
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "unknown role %q", m.Role)
		}
		var text string
		switch {
		case len(m.Content) == 0 || isNull(m.Content):
		case json.Unmarshal(m.Content, &text) == nil:
		default:
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "content must be a string or a list of text parts")
			}
			for _, p := range parts {
				if p.Type != "text" {
					return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "content part type %q is not supported (text only)", p.Type)
				}
				text += p.Text
			}
		}
		out = append(out, ChatMessage{Role: m.Role, Content: text})
	}
	return out, nil
}

// ---- handlers ----

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// Details says how many prompt tokens a kept session already held
	// (OpenAI's prompt caching field).
	Details *promptDetails `json:"prompt_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func usageOf(r *Result) *usage {
	u := &usage{r.PromptTokens, len(r.IDs), r.PromptTokens + len(r.IDs), nil}
	if r.CachedTokens > 0 {
		u.Details = &promptDetails{r.CachedTokens}
	}
	return u
}

// finishReason maps the engine's reasons onto OpenAI's ("eos" is "stop").
func finishReason(r string) string {
	if r == "eos" {
		return "stop"
	}
	return r
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	seen := map[string]bool{}
	list := []model{}
	for _, wi := range s.Workers() {
		for _, m := range wi.Models {
			if !seen[m] {
				seen[m] = true
				list = append(list, model{m, "model", s.started.Unix(), "cortiq"})
			}
		}
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": list})
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.handleOpenAI(w, r, false)
}
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) { s.handleOpenAI(w, r, true) }

func (s *Server) handleOpenAI(w http.ResponseWriter, r *http.Request, chat bool) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	d, aerr := decodeOpenAI(body, chat)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	wk, aerr := s.pick("", d.model)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	model := d.model
	if model == "" {
		if ms := wk.info().Models; len(ms) > 0 {
			model = ms[0]
		}
	}
	id := newID("cmpl-")
	object := "text_completion"
	if chat {
		id, object = newID("chatcmpl-"), "chat.completion"
	}
	created := time.Now().Unix()

	if !d.stream {
		res, err := s.run(r.Context(), wk, d.gen, func(Token) error { return nil })
		if err != nil {
			writeError(w, asAPIError(err))
			return
		}
		choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finishReason(res.FinishReason)}
		if chat {
			choice["message"] = map[string]any{"role": "assistant", "content": res.Text}
		} else {
			choice["text"] = res.Text
		}
		writeJSON(w, 200, map[string]any{
			"id": id, "object": object, "created": created, "model": model,
			"choices": []any{choice}, "usage": usageOf(res), "system_fingerprint": "cortiq-" + res.Backend,
		})
		return
	}

	// Streaming: headers go out only once the generation is admitted, so
	// that a refusal is still an ordinary JSON error.
	sse := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	chunkObject := object
	if chat {
		chunkObject = "chat.completion.chunk"
	}
	chunk := func(delta map[string]any, text string, finish any) map[string]any {
		c := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish}
		if chat {
			c["delta"] = delta
		} else {
			c["text"] = text
		}
		return map[string]any{"id": id, "object": chunkObject, "created": created, "model": model, "choices": []any{c}}
	}
	started := false
	start := func() error {
		if started {
			return nil
		}
		started = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(200)
		if chat {
			return sse.send(chunk(map[string]any{"role": "assistant", "content": ""}, "", nil))
		}
		return nil
	}
	res, err := s.run(r.Context(), wk, d.gen, func(t Token) error {
		if err := start(); err != nil {
			return err
		}
		if t.Text == "" {
			return nil
		}
		return sse.send(chunk(map[string]any{"content": t.Text}, t.Text, nil))
	})
	if err != nil {
		if !started {
			writeError(w, asAPIError(err))
			return
		}
		if sse.err == nil {
			ae := asAPIError(err)
			sse.send(map[string]any{"error": errorBody(ae)})
			sse.done()
		}
		return
	}
	if err := start(); err != nil {
		return
	}
	sse.send(chunk(map[string]any{}, "", finishReason(res.FinishReason)))
	if d.includeUsage {
		sse.send(map[string]any{"id": id, "object": chunkObject, "created": created, "model": model,
			"choices": []any{}, "usage": usageOf(res)})
	}
	sse.done()
}

// readBody reads a request body (under the limit api set) and lifts the
// read deadline serveRoot set on it, so that a long response is not cut
// by it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, &apiError{Status: 413, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
				Message: fmt.Sprintf("the request body did not arrive within %v", s.cfg.BodyTimeout)}
		}
		return nil, badRequest("", "reading the body: %v", err)
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, nil
}

// sseWriter writes server-sent events with a deadline per write, so a
// client that stops reading fails its own generation instead of holding it.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error
	buf     bytes.Buffer
}

func (s *sseWriter) send(v any) error {
	if s.err != nil {
		return s.err
	}
	s.buf.Reset()
	s.buf.WriteString("data: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.err = err
		return err
	}
	s.buf.WriteString("\n")
	return s.raw(s.buf.Bytes())
}

func (s *sseWriter) raw(b []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

func (s *sseWriter) done() { s.raw([]byte("data: [DONE]\n\n")) }

func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, errShutdown) {
		return &apiError{Status: 503, Type: "server_error", Code: "shutting_down", Message: err.Error()}
	}
	// Engine errors are mostly about the input (prompt too long, ids out of
	// the vocabulary, no tokenizer): report them as the client's.
	return &apiError{Status: 400, Type: "invalid_request_error", Message: err.Error()}
}

func errorBody(e *apiError) map[string]any {
	var param, code any
	if e.Param != "" {
		param = e.Param
	}
	if e.Code != "" {
		code = e.Code
	}
	return map[string]any{"message": e.Message, "type": e.Type, "param": param, "code": code}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == 401 {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeJSON(w, e.Status, map[string]any{"error": errorBody(e)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

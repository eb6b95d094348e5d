package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/cortiq/cortiq/sample"
)

// Msg is every websocket message of protocol version 1, in both
// directions: "type" says which fields matter (docs/protocol.md). One flat
// struct keeps the JSON simple for the browser side; absent fields are
// zero.
type Msg struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"` // chosen by whoever starts the exchange

	// hello
	Protocol     int         `json:"protocol,omitempty"`
	Server       *ServerInfo `json:"server,omitempty"`
	Role         string      `json:"role,omitempty"`
	AuthRequired bool        `json:"auth_required,omitempty"`

	// auth
	Token string `json:"token,omitempty"`

	// generate / load / register targets
	Worker string   `json:"worker,omitempty"`
	Model  string   `json:"model,omitempty"`
	Name   string   `json:"name,omitempty"`
	Models []string `json:"models,omitempty"`

	// generate input
	Prompt           string        `json:"prompt,omitempty"`
	IDs              []int         `json:"ids,omitempty"`
	Messages         []ChatMessage `json:"messages,omitempty"`
	MaxTokens        int           `json:"max_tokens,omitempty"`
	Stop             []string      `json:"stop,omitempty"`
	IgnoreEOS        bool          `json:"ignore_eos,omitempty"`
	Temperature      float64       `json:"temperature,omitempty"`
	TopK             int           `json:"top_k,omitempty"`
	TopP             float64       `json:"top_p,omitempty"`
	MinP             float64       `json:"min_p,omitempty"`
	RepeatPenalty    float64       `json:"repeat_penalty,omitempty"`
	PresencePenalty  float64       `json:"presence_penalty,omitempty"`
	FrequencyPenalty float64       `json:"frequency_penalty,omitempty"`
	RepeatLastN      int           `json:"repeat_last_n,omitempty"`
	Seed             uint64        `json:"seed,omitempty"`

	// imagine input (prompt and seed as above)
	Negative string   `json:"negative_prompt,omitempty"`
	Size     string   `json:"size,omitempty"`
	Steps    *int     `json:"steps,omitempty"`
	Guidance *float64 `json:"guidance_scale,omitempty"`

	// events
	TokenID  *int           `json:"token_id,omitempty"` // "token": the id
	Text     string         `json:"text,omitempty"`     // "token": its text
	Result   *Result        `json:"result,omitempty"`   // "done"
	Error    *ErrorBody     `json:"error,omitempty"`    // "error"
	Workers  []WorkerInfo   `json:"workers,omitempty"`  // "workers"
	Info     *WorkerInfo    `json:"info,omitempty"`     // "loaded", "registered"
	Stats    *Stats         `json:"stats,omitempty"`    // "stats"
	Progress *Progress      `json:"progress,omitempty"` // "progress"
	Image    *ImageEvent    `json:"image,omitempty"`    // "image"
	Time     int64          `json:"time,omitempty"`     // "ping"/"pong": sender's clock, ms
	Backend  string         `json:"backend,omitempty"`  // "register"
	Extra    map[string]any `json:"extra,omitempty"`    // free-form worker details
}

// ServerInfo is the server's identity in hello.
type ServerInfo struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Protocols []int    `json:"protocols"`
	Models    []string `json:"models"`
}

// ErrorBody is an error event's payload; Code is machine-readable.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Stats is the "stats" reply.
type Stats struct {
	UptimeS         float64      `json:"uptime_s"`
	Active          int64        `json:"active"`
	TokensGenerated int64        `json:"tokens_generated"`
	PromptTokens    int64        `json:"prompt_tokens"`
	Connections     int64        `json:"connections"`
	Workers         []WorkerInfo `json:"workers"`
}

// Limits of a decoded message, beyond the byte limit of the socket.
const (
	maxIDLen     = 128
	maxPromptIDs = 1 << 17
)

// DecodeMsg parses and validates one websocket message. It never panics
// and allocates in proportion to data only.
func DecodeMsg(data []byte) (*Msg, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("message is not UTF-8 text")
	}
	var m Msg
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("message is not a JSON object: %v", err)
	}
	if m.Type == "" {
		return nil, errors.New("message has no type")
	}
	if len(m.Type) > 32 {
		return nil, errors.New("message type too long")
	}
	if len(m.ID) > maxIDLen {
		return nil, fmt.Errorf("id longer than %d bytes", maxIDLen)
	}
	if len(m.IDs) > maxPromptIDs {
		return nil, fmt.Errorf("more than %d prompt ids", maxPromptIDs)
	}
	if len(m.Stop) > maxStops {
		return nil, fmt.Errorf("at most %d stop strings", maxStops)
	}
	if len(m.Messages) > maxMessages {
		return nil, fmt.Errorf("at most %d chat messages", maxMessages)
	}
	if m.MaxTokens < 0 {
		return nil, errors.New("max_tokens must be >= 0")
	}
	for _, f := range []float64{m.Temperature, m.TopP, m.MinP, m.RepeatPenalty, m.PresencePenalty, m.FrequencyPenalty} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("sampling parameter is not finite")
		}
	}
	if m.Temperature < 0 || m.TopK < 0 || m.TopP < 0 || m.MinP < 0 || m.RepeatPenalty < 0 || m.RepeatLastN < -1 {
		return nil, errors.New("negative sampling parameter")
	}
	return &m, nil
}

// genRequest is a generate message's request. Omitted sampling fields are
// zero: greedy, no top-k/p, no penalties.
func (m *Msg) genRequest() GenRequest {
	return GenRequest{
		Prompt: m.Prompt, IDs: m.IDs, Messages: m.Messages, MaxTokens: m.MaxTokens, Stop: m.Stop, IgnoreEOS: m.IgnoreEOS,
		Sampling: sample.Params{
			Temperature: float32(m.Temperature), TopK: m.TopK, TopP: float32(m.TopP), MinP: float32(m.MinP),
			RepeatPenalty: float32(m.RepeatPenalty), PresencePenalty: float32(m.PresencePenalty),
			FrequencyPenalty: float32(m.FrequencyPenalty), RepeatLastN: m.RepeatLastN, Seed: m.Seed,
		},
	}
}

// generateMsg is the inverse of genRequest, used to relay to a worker.
func generateMsg(id string, g GenRequest) *Msg {
	p := g.Sampling
	return &Msg{Type: "generate", ID: id, Prompt: g.Prompt, IDs: g.IDs, Messages: g.Messages, MaxTokens: g.MaxTokens,
		Stop: g.Stop, IgnoreEOS: g.IgnoreEOS,
		Temperature: float64(p.Temperature), TopK: p.TopK, TopP: float64(p.TopP), MinP: float64(p.MinP),
		RepeatPenalty: float64(p.RepeatPenalty), PresencePenalty: float64(p.PresencePenalty),
		FrequencyPenalty: float64(p.FrequencyPenalty), RepeatLastN: p.RepeatLastN, Seed: p.Seed}
}

func errMsg(id, code, format string, args ...any) *Msg {
	return &Msg{Type: "error", ID: id, Error: &ErrorBody{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func errMsgFrom(id string, err error) *Msg {
	ae := asAPIError(err)
	code := ae.Code
	if code == "" {
		code = ae.Type
	}
	return &Msg{Type: "error", ID: id, Error: &ErrorBody{Code: code, Message: ae.Message}}
}

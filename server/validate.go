package server

import (
	"math"
)

// Bounds of a generation's parameters, the same for every front end
// (docs/protocol.md lists them).
const (
	maxTemperature   = 100
	maxRepeatPenalty = 100
	maxPresencePen   = 2 // presence and frequency penalties: OpenAI's [-2, 2]
)

// validateGen checks a generation request whatever front end decoded it
// (the OpenAI endpoints, a websocket generate): at most one input, and
// every size and sampling parameter in its documented range. Values that
// mean "off" (0 for top_p, min_p, repeat_penalty) are in range.
func validateGen(g *GenRequest) *apiError {
	inputs := 0
	for _, set := range []bool{g.Prompt != "", g.IDs != nil, g.Messages != nil} {
		if set {
			inputs++
		}
	}
	if inputs > 1 {
		return badRequest("prompt", "prompt, ids and messages are exclusive: send exactly one")
	}
	if g.IDs != nil && len(g.IDs) == 0 {
		return badRequest("ids", "ids is an empty list")
	}
	if g.Messages != nil && len(g.Messages) == 0 {
		return badRequest("messages", "messages is an empty list")
	}
	if len(g.IDs) > maxPromptIDs {
		return badRequest("ids", "at most %d prompt ids, got %d", maxPromptIDs, len(g.IDs))
	}
	if len(g.Stop) > maxStops {
		return badRequest("stop", "at most %d stop strings, got %d", maxStops, len(g.Stop))
	}
	if g.MaxTokens < 0 {
		return badRequest("max_tokens", "max_tokens must be >= 0, got %d", g.MaxTokens)
	}
	p := &g.Sampling
	for _, f := range []struct {
		name   string
		v      float32
		lo, hi float64
	}{
		{"temperature", p.Temperature, 0, maxTemperature},
		{"top_p", p.TopP, 0, 1},
		{"min_p", p.MinP, 0, 1},
		{"repeat_penalty", p.RepeatPenalty, 0, maxRepeatPenalty},
		{"presence_penalty", p.PresencePenalty, -maxPresencePen, maxPresencePen},
		{"frequency_penalty", p.FrequencyPenalty, -maxPresencePen, maxPresencePen},
	} {
		if v := float64(f.v); math.IsNaN(v) || v < f.lo || v > f.hi {
			return badRequest(f.name, "%s=%g is out of range [%g, %g]", f.name, f.v, f.lo, f.hi)
		}
	}
	if p.TopK < 0 {
		return badRequest("top_k", "top_k must be >= 0, got %d", p.TopK)
	}
	if p.RepeatLastN < -1 {
		return badRequest("repeat_last_n", "repeat_last_n must be >= -1, got %d", p.RepeatLastN)
	}
	return nil
}

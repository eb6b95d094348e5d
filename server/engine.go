package server

import (
	"context"

	"github.com/cortiq/cortiq/chat"
	"github.com/cortiq/cortiq/engine"
)

// FromEngine adapts the engine facade to Model: chat messages go through
// the model's template (ChatPrompt, then EncodeTemplated), as cortiq run
// --chat does.
func FromEngine(e *engine.Engine) Model { return engineModel{e} }

type engineModel struct{ e *engine.Engine }

func (m engineModel) BackendName() string { return m.e.BackendName() }
func (m engineModel) Close() error        { return m.e.Close() }

func (m engineModel) Generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error) {
	er, err := EngineRequest(m.e, req)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	res, err := m.e.Generate(ctx, er, func(t engine.Token) error { return onToken(Token{ID: t.ID, Text: t.Text}) })
	if err != nil {
		return nil, err
	}
	return &Result{
		IDs: res.IDs, Text: res.Text, PromptTokens: res.PromptTokens, PrefillTokS: res.PrefillTokS,
		DecodeTokS: res.DecodeTokS, Backend: res.Backend, FinishReason: res.FinishReason, DeviceError: res.DeviceError,
		Spec: res.Spec, CachedTokens: res.CachedTokens,
		BackendReason: res.BackendReason,
	}, nil
}

// EngineRequest is the engine request a GenRequest stands for: the one
// the server runs, and the one tests run directly for reference output.
func EngineRequest(e *engine.Engine, req GenRequest) (engine.Request, error) {
	er := engine.Request{Prompt: req.Prompt, IDs: req.IDs, MaxTokens: req.MaxTokens, Sampling: req.Sampling,
		Stop: req.Stop, IgnoreEOS: req.IgnoreEOS}
	if req.Messages != nil {
		msgs := make([]chat.Message, len(req.Messages))
		for i, m := range req.Messages {
			msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
		}
		text, err := e.ChatPrompt(msgs)
		if err != nil {
			return er, err
		}
		ids, err := e.EncodeTemplated(text)
		if err != nil {
			return er, err
		}
		er.Prompt, er.IDs = "", ids
	}
	return er, nil
}

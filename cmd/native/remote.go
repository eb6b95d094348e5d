package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/cortiq/cortiq/server"
)

func init() {
	register("remote", "remote [--server URL] [--token T] [--worker ID] run|workers|stats [flags]", "drive a cortiq server over its websocket protocol (run, workers, stats)", cmdRemote)
}

func cmdRemote(args []string) error {
	fs := newFlags("remote")
	addr := fs.String("server", "http://127.0.0.1:8080", "server URL (http://, https://, ws:// or wss://)")
	token := fs.String("token", os.Getenv("CORTIQ_TOKEN"), "bearer token (default $CORTIQ_TOKEN)")
	workerID := fs.String("worker", "", "worker id to run on (see 'cortiq remote workers'); default: by model")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{fs, errors.New("no remote command: want run, workers or stats")}
	}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	ctx, cancel := interruptible()
	defer cancel()
	if sub == "run" && slices.ContainsFunc(rest, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		return remoteRun(ctx, nil, *workerID, rest) // help needs no server
	}
	c, err := server.Dial(ctx, *addr, *token)
	if err != nil {
		return err
	}
	defer c.Close()
	switch sub {
	case "workers":
		ws, err := c.Workers(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tMODELS\tBACKEND\tACTIVE\tNAME")
		for _, w := range ws {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%s\n", w.ID, w.Kind, w.Models, w.Backend, w.Active, w.Name)
		}
		return tw.Flush()
	case "stats":
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	case "run":
		return remoteRun(ctx, c, *workerID, rest)
	}
	return fmt.Errorf("unknown remote command %q: want run, workers or stats", sub)
}

// remoteRun is 'cortiq run' against a server: same flags where they make
// sense, same output.
func remoteRun(ctx context.Context, c *server.Client, workerID string, args []string) error {
	synopses["remote run"] = "remote [--server URL] [--token T] run [-p TEXT | --ids 1,2,3] [-n N] [flags]"
	fs := newFlags("remote run")
	var sf samplingFlags
	sf.register(fs)
	worker := fs.String("worker", workerID, "worker id to run on (also accepted before 'run')")
	model := fs.String("model", "", "model name on the server (default: the worker's, or the server's first)")
	prompt := fs.String("p", "", "prompt text")
	idsFlag := fs.String("ids", "", "prompt token ids, comma separated (no BOS is added)")
	n := fs.Int("n", 128, "tokens to generate (-1 = up to the context limit)")
	jsonOut := fs.Bool("json", false, "print JSON Lines: one object per token, then a final summary")
	useChat := fs.Bool("chat", false, "wrap the prompt in the model's chat template as a user message")
	system := fs.String("system", "", "system message (with --chat)")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-sequence tokens")
	var stops multiFlag
	fs.Var(&stops, "stop", "stop string (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if err := sf.check(); err != nil {
		return usageError{fs, err}
	}
	if *n == 0 {
		return usageError{fs, fmt.Errorf("-n 0: nothing to ask the server for (-1 = up to the context limit)")}
	}
	maxNew, err := maxTokens(*n)
	if err != nil {
		return usageError{fs, err}
	}
	p := sf.params()
	m := &server.Msg{
		Worker: *worker, Model: *model, MaxTokens: maxNew, Stop: stops, IgnoreEOS: *ignoreEOS,
		Temperature: float64(p.Temperature), TopK: p.TopK, TopP: float64(p.TopP), MinP: float64(p.MinP),
		RepeatPenalty: float64(p.RepeatPenalty), PresencePenalty: float64(p.PresencePenalty),
		FrequencyPenalty: float64(p.FrequencyPenalty), RepeatLastN: p.RepeatLastN, Seed: p.Seed,
	}
	switch {
	case *idsFlag != "":
		ids, err := parseIDs(*idsFlag)
		if err != nil {
			return err
		}
		m.IDs = ids
	case *useChat:
		if *system != "" {
			m.Messages = append(m.Messages, server.ChatMessage{Role: "system", Content: *system})
		}
		m.Messages = append(m.Messages, server.ChatMessage{Role: "user", Content: *prompt})
	default:
		m.Prompt = *prompt
		if m.Prompt == "" {
			m.Prompt = "Once upon a time"
		}
	}
	out := os.Stdout
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if !*jsonOut && m.Prompt != "" {
		fmt.Fprint(out, m.Prompt)
	}
	res, err := c.Generate(ctx, m, func(t server.Token) error {
		if *jsonOut {
			return enc.Encode(t)
		}
		_, err := fmt.Fprint(out, t.Text)
		return err
	})
	if err != nil {
		return interrupted(ctx, err)
	}
	if *jsonOut {
		return enc.Encode(struct {
			Done bool `json:"done"`
			*server.Result
			Seed uint64 `json:"seed"`
		}{true, res, p.Seed})
	}
	fmt.Fprintln(out)
	fmt.Fprintf(os.Stderr, "\n[%s on %s] prompt %d tok, %.1f tok/s prefill, %.1f tok/s decode, %d generated (%s), first token %.0f ms\n",
		res.Backend, res.Worker, res.PromptTokens, res.PrefillTokS, res.DecodeTokS, len(res.IDs), res.FinishReason, res.TTFTMs)
	return nil
}

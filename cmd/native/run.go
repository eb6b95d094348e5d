package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortiq/cortiq/chat"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/sample"
	"github.com/cortiq/cortiq/webgpu"
)

// modelFlags are the flags every command that loads a model shares.
type modelFlags struct {
	model      string
	backend    string
	ctx        int
	gpuLayers  string
	devices    string
	vramBudget string
	memBudget  string
	kv         string
	cpuPrefill bool
	// rewindDepth sizes the sessions' rewind (speculative decoding).
	rewindDepth int
	// prefixCache is the byte budget of kept sessions (prefix reuse).
	prefixCache int64
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.model, "m", "", "model: a path (HF directory, .gguf, .cmf) or a name (default "+resolve.DefaultModel+")")
	fs.StringVar(&m.backend, "backend", "auto", "backend: auto, cpu, webgpu or cuda")
	fs.StringVar(&m.devices, "devices", "", "CUDA devices for --backend cuda, e.g. 0,1 (layers split by --gpu-layers 0:0-13,1:14-27 or by free memory)")
	fs.IntVar(&m.ctx, "ctx", 0, "context length, up to the model's (0 = the model's, at most 4096; `cortiq info --ctx N` prints what it needs)")
	fs.StringVar(&m.gpuLayers, "gpu-layers", os.Getenv("CORTIQ_GPU_LAYERS"), "layer ranges on the device, e.g. 0-9,20-29")
	fs.StringVar(&m.vramBudget, "vram-budget", os.Getenv("CORTIQ_VRAM_BUDGET"), "bytes of device memory (e.g. 2GiB): weights, and with --ctx one session of that context")
	fs.StringVar(&m.memBudget, "mem-budget", os.Getenv("CORTIQ_MEM_BUDGET"), "bytes of memory one CPU session may take (KV, state, activations), e.g. 8GiB")
	fs.StringVar(&m.kv, "kv", "f32", "KV cache element: f32 (exact) or f16 (half the memory)")
	fs.BoolVar(&m.cpuPrefill, "prefill-on-cpu", false, "run the prompt on the CPU and hand its KV cache and recurrent state to the device for decoding")
}

func (m *modelFlags) load(ctx context.Context) (*engine.Engine, error) {
	if !slices.Contains(engine.Backends(), m.backend) {
		return nil, fmt.Errorf("--backend %q: want one of %s", m.backend, strings.Join(engine.Backends(), ", "))
	}
	backend := autoFromEnv(m.backend)
	if m.ctx < 0 {
		return nil, fmt.Errorf("--ctx %d: want a context length, or 0 for the model's", m.ctx)
	}
	budget, err := parseBytes(m.vramBudget)
	if err != nil {
		return nil, fmt.Errorf("--vram-budget (or CORTIQ_VRAM_BUDGET): %w", err)
	}
	memBudget, err := parseBytes(m.memBudget)
	if err != nil {
		return nil, fmt.Errorf("--mem-budget: %w", err)
	}
	if m.kv != "f32" && m.kv != "f16" {
		return nil, fmt.Errorf("--kv %q: want f32 or f16", m.kv)
	}
	// A bad layer list is the user's mistake, not a device failure: refuse
	// it rather than run on the CPU. (cuda's per-device ranges are checked
	// against the model when it opens.)
	tuning := any(gpuTuning())
	if backend == "cuda" {
		var devices []int
		for _, d := range strings.Split(m.devices, ",") {
			if d = strings.TrimSpace(d); d == "" {
				continue
			}
			n, err := strconv.Atoi(d)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--devices %q: want CUDA device numbers, e.g. 0,1", m.devices)
			}
			devices = append(devices, n)
		}
		// CORTIQ_CUDA_PDL=0: the decode graphs' kernels launched plainly (A/B).
		tuning = cuda.Tuning{Devices: devices, PlainLaunches: os.Getenv("CORTIQ_CUDA_PDL") == "0"}
	} else if _, err := webgpu.ParseLayerRanges(m.gpuLayers, 0); err != nil {
		return nil, fmt.Errorf("--gpu-layers (or CORTIQ_GPU_LAYERS): %w", err)
	}
	lp := newLoadProgress(backend == "webgpu")
	e, err := engine.Load(ctx, newResolver(), m.model, engine.Options{
		Backend: backend, NoProbe: os.Getenv("CORTIQ_PROBE") == "0", MaxContext: m.ctx, GPULayers: m.gpuLayers, VRAMBudget: budget, MemBudget: memBudget, KV: m.kv,
		PrefillOnCPU: m.cpuPrefill, RewindDepth: m.rewindDepth, PrefixCacheBytes: m.prefixCache,
		ProbeCache: probeCachePath(), Progress: lp.stage, Tuning: tuning,
	})
	lp.done(e)
	if err != nil {
		return nil, interrupted(ctx, err) // Ctrl-C stopped the load: exit 130
	}
	if (backend == "webgpu" || backend == "cuda") && e.DeviceError() != nil {
		fmt.Fprintf(os.Stderr, "cortiq: %s unavailable, running on the CPU: %v\n", backend, e.DeviceError())
	}
	printRace(e)
	return e, nil
}

// printRace tells, on stderr, what --backend auto measured on this load
// (nothing when its verdicts came from the cache: `cortiq devices` lists
// those).
func printRace(e *engine.Engine) {
	for _, v := range e.ProbeVerdicts() {
		if v.Cached {
			continue
		}
		var best []string
		for i, d := range v.Best {
			if d > 0 {
				best = append(best, fmt.Sprintf("%s %.3gms", v.Arms[i], float64(d)/1e6))
			}
		}
		fmt.Fprintf(os.Stderr, "[auto] %s: %s (best step: %s)\n", v.Class, cmp.Or(v.Winner, "undecided"), strings.Join(best, ", "))
		if v.Note != "" {
			fmt.Fprintf(os.Stderr, "[auto]   %s\n", v.Note)
		}
	}
}

func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a byte size", s)
	}
	return int64(v * float64(mult)), nil
}

func parseIDs(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '[' || r == ']' }) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--ids: %q is not a token id", f)
		}
		ids = append(ids, v)
	}
	if len(ids) == 0 {
		return nil, errors.New("--ids: no token ids")
	}
	return ids, nil
}

// samplingFlags are the sampler's flags.
type samplingFlags struct {
	temp, topP, minP, repeat, presence, frequency float64
	topK, repeatLastN                             int
	seed                                          int64
}

func (s *samplingFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.temp, "temp", 0.8, "temperature (0 = greedy)")
	fs.IntVar(&s.topK, "top-k", 40, "top-k (0 = off)")
	fs.Float64Var(&s.topP, "top-p", 0.95, "top-p (1 = off)")
	fs.Float64Var(&s.minP, "min-p", 0.05, "min-p (0 = off)")
	fs.Float64Var(&s.repeat, "repeat-penalty", 1.0, "repetition penalty (1 = off)")
	fs.Float64Var(&s.presence, "presence-penalty", 0, "presence penalty")
	fs.Float64Var(&s.frequency, "frequency-penalty", 0, "frequency penalty")
	fs.IntVar(&s.repeatLastN, "repeat-last-n", 64, "tokens the penalties look back at (-1 = all)")
	fs.Int64Var(&s.seed, "seed", -1, "random seed (-1 = from the clock); when sampling, the seed used is printed with the stats on stderr and in --json's summary")
}

// check refuses values outside each parameter's range, naming the flag:
// nothing out of range is silently clamped or ignored.
func (s *samplingFlags) check() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case bad(s.temp) || s.temp < 0:
		return fmt.Errorf("--temp %g: want a temperature >= 0 (0 = greedy)", s.temp)
	case s.topK < 0:
		return fmt.Errorf("--top-k %d: want >= 0 (0 = off)", s.topK)
	case bad(s.topP) || s.topP < 0 || s.topP > 1:
		return fmt.Errorf("--top-p %g: want a probability in [0, 1] (1 = off)", s.topP)
	case bad(s.minP) || s.minP < 0 || s.minP > 1:
		return fmt.Errorf("--min-p %g: want a probability in [0, 1] (0 = off)", s.minP)
	case bad(s.repeat) || s.repeat <= 0:
		return fmt.Errorf("--repeat-penalty %g: want > 0 (1 = off)", s.repeat)
	case bad(s.presence):
		return fmt.Errorf("--presence-penalty %g: want a finite number", s.presence)
	case bad(s.frequency):
		return fmt.Errorf("--frequency-penalty %g: want a finite number", s.frequency)
	case s.repeatLastN < -1:
		return fmt.Errorf("--repeat-last-n %d: want >= -1 (-1 = all)", s.repeatLastN)
	}
	return nil
}

// maxTokens maps -n to a request's MaxTokens, where 0 means "to the
// context limit": -n -1 is to the context limit, -n 0 generates nothing
// (the caller checks), anything below -1 is refused.
func maxTokens(n int) (int, error) {
	switch {
	case n < -1:
		return 0, fmt.Errorf("-n %d: want a token count, 0 for none or -1 for up to the context limit", n)
	case n == -1:
		return 0, nil
	}
	return n, nil
}

func (s *samplingFlags) params() sample.Params {
	seed := uint64(s.seed)
	if s.seed < 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return sample.Params{
		Temperature: float32(s.temp), TopK: s.topK, TopP: float32(s.topP), MinP: float32(s.minP),
		RepeatPenalty: float32(s.repeat), PresencePenalty: float32(s.presence), FrequencyPenalty: float32(s.frequency),
		RepeatLastN: s.repeatLastN, Seed: seed,
	}
}

// interruptible is cancelled by Ctrl-C or SIGTERM: the command stops
// cleanly (temporary files removed, partial output flushed) and exits 130.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func init() {
	register("run", "run [-m MODEL] [-p TEXT | --ids 1,2,3] [-n N] [--temp T] [flags]", "generate text from a prompt or token ids", cmdRun)
}

func cmdRun(args []string) error {
	fs := newFlags("run")
	var mf modelFlags
	var sf samplingFlags
	var spf specFlags
	mf.register(fs)
	sf.register(fs)
	spf.register(fs)
	prompt := fs.String("p", "", "prompt text")
	idsFlag := fs.String("ids", "", "prompt token ids, comma separated (no BOS is added)")
	n := fs.Int("n", 128, "tokens to generate (0 = none, only the prompt is read; -1 = up to the context limit)")
	jsonOut := fs.Bool("json", false, "print JSON Lines: one object per token, then a final summary")
	useChat := fs.Bool("chat", false, "wrap the prompt in the model's chat template as a user message")
	system := fs.String("system", "", "system message (with --chat)")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-sequence tokens")
	greedyBatch := fs.Int("greedy-batch", 1, "with --temp 0: greedy tokens picked per device submit (argmax on the device)")
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
	maxNew, err := maxTokens(*n)
	if err != nil {
		return usageError{fs, err}
	}
	if *greedyBatch < 1 {
		return usageError{fs, fmt.Errorf("--greedy-batch %d: want at least 1", *greedyBatch)}
	}
	if err := spf.prepare(&mf); err != nil {
		return err
	}
	ctx, cancel := interruptible()
	defer cancel()
	e, err := mf.load(ctx)
	if err != nil {
		return interrupted(ctx, err)
	}
	defer e.Close()
	closeDraft, err := spf.attach(ctx, mf, e)
	if err != nil {
		return err
	}
	defer closeDraft()
	req := engine.Request{MaxTokens: maxNew, Sampling: sf.params(), Stop: stops, IgnoreEOS: *ignoreEOS, GreedyBatch: *greedyBatch}
	switch {
	case *idsFlag != "":
		if req.IDs, err = parseIDs(*idsFlag); err != nil {
			return err
		}
	case *useChat:
		text, err := renderChat(e, []chat.Message{{Role: "user", Content: *prompt}}, *system)
		if err != nil {
			return err
		}
		if req.IDs, err = e.EncodeTemplated(text); err != nil {
			return err
		}
	default:
		req.Prompt = *prompt
		if req.Prompt == "" {
			req.Prompt = "Once upon a time"
		}
		// Tokenize before echoing the prompt: a model without a
		// tokenizer fails here, with nothing printed.
		if req.IDs, err = e.Encode(req.Prompt); err != nil {
			return err
		}
	}
	out := os.Stdout
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if !*jsonOut && req.Prompt != "" {
		fmt.Fprint(out, req.Prompt)
	}
	if *n == 0 {
		// -n 0: the prompt is read (and checked), nothing generated.
		if *jsonOut {
			return enc.Encode(map[string]any{"done": true, "ids": []int{}, "text": "", "prompt_tokens": len(req.IDs), "finish_reason": "length"})
		}
		fmt.Fprintln(out)
		fmt.Fprintf(os.Stderr, "\n[%s] prompt %d tok, 0 generated (-n 0)\n", e.BackendName(), len(req.IDs))
		return nil
	}
	res, err := e.Generate(ctx, req, func(t engine.Token) error {
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
		if err := enc.Encode(struct {
			Done bool `json:"done"`
			*engine.Result
			Seed uint64 `json:"seed"`
		}{true, res, req.Sampling.Seed}); err != nil {
			return err
		}
		if res.FinishReason == "cancelled" {
			return errInterrupted
		}
		return nil
	}
	fmt.Fprintln(out)
	seed := ""
	if !req.Sampling.Greedy() {
		seed = fmt.Sprintf(", seed %d", req.Sampling.Seed)
	}
	fmt.Fprintf(os.Stderr, "\n[%s] prompt %d tok, %.1f tok/s prefill, %.1f tok/s decode, %d generated (%s%s)\n",
		res.Backend, res.PromptTokens, res.PrefillTokS, res.DecodeTokS, len(res.IDs), res.FinishReason, seed)
	if res.BackendReason != "" {
		fmt.Fprintf(os.Stderr, "[auto] %s\n", res.BackendReason)
	}
	if res.FinishReason == "cancelled" {
		return errInterrupted
	}
	return nil
}

// interrupted turns the error of work cut short by a signal into
// errInterrupted (exit status 130).
func interrupted(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", errInterrupted, err)
	}
	return err
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

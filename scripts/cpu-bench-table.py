#!/usr/bin/env python3
"""The table of a CPU comparison log: cortiq binaries against llama.cpp.

    python3 scripts/cpu-bench-table.py cpu.jsonl [more.jsonl ...]

Reads the logs of scripts/cpu-bench-h200.sh (llama-bench -o jsonl) and
scripts/cpu-bench-ab.sh (node-llama-cpp's llamacpp-bench.mjs): each result
line follows a note line {"note": "threads T round R cortiq NAME FILE"} or
{"note": "threads T round R llama.cpp FILE"}. Prints, per thread count and
file, each side's prefill / decode tok/s (the mean over rounds, each round
the best of its repetitions, as cortiq bench reports), and each cortiq
binary's ratio to llama.cpp; the read bandwidth lines (cortiq bench
--bandwidth) are listed per thread count."""
import json
import sys
from collections import defaultdict


def main(paths):
    # (threads, file) -> tool -> [(pp, tg)]
    runs = defaultdict(lambda: defaultdict(list))
    bw = defaultdict(list)
    tools = []
    for path in paths:
        ctx = None
        pending = {}  # llama-bench writes pp and tg on two lines
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if "note" in d:
                w = d["note"].split()
                ctx = None
                if len(w) >= 5 and w[0] == "threads" and w[2] == "round":
                    t = int(w[1])
                    if w[4] == "bandwidth":
                        ctx = (t, "bandwidth", None)
                    elif w[4] == "cortiq" and len(w) >= 7:
                        ctx = (t, w[6], "cortiq " + w[5])
                    elif w[4] == "llama.cpp" and len(w) >= 6:
                        ctx = (t, w[5], "llama.cpp")
                pending = {}
                continue
            if ctx is None:
                continue
            t, f, tool = ctx
            if f == "bandwidth":
                if d.get("read_gb_s"):
                    bw[t].append(d["read_gb_s"])
                continue
            if tool not in tools:
                tools.append(tool)
            if "prefill_tok_s" in d:  # cortiq bench --json
                runs[(t, f)][tool].append((d["prefill_tok_s"], d["decode_tok_s"]))
            elif "prefill" in d and "decode" in d:  # llamacpp-bench.mjs
                runs[(t, f)][tool].append((d["prefill"], d["decode"]))
            elif "n_prompt" in d:  # llama-bench -o jsonl
                best = max(d.get("samples_ts") or [d.get("avg_ts", 0)])
                if d.get("n_prompt", 0) > 0 and d.get("n_gen", 0) == 0:
                    pending["pp"] = best
                elif d.get("n_gen", 0) > 0 and d.get("n_prompt", 0) == 0:
                    pending["tg"] = best
                if "pp" in pending and "tg" in pending:
                    runs[(t, f)][tool].append((pending["pp"], pending["tg"]))
                    pending = {}
    mean = lambda xs: sum(xs) / len(xs) if xs else 0
    cortiqs = [x for x in tools if x.startswith("cortiq")]
    for t in sorted({k[0] for k in runs}, reverse=True):
        if bw[t]:
            print("threads %d: read bandwidth %s GB/s" % (t, ", ".join("%.1f" % x for x in bw[t])))
        head = ["file"] + ["%s pp / tg" % x for x in cortiqs + ["llama.cpp"]] + ["%s ratio pp / tg" % x.split()[1] for x in cortiqs]
        print("\n| threads %d: " % t + " | ".join(head) + " |")
        print("|" + "---|" * (len(head)))
        for f in sorted(k[1] for k in runs if k[0] == t):
            r = runs[(t, f)]
            cells = [f]
            lp, lt = mean([x[0] for x in r["llama.cpp"]]), mean([x[1] for x in r["llama.cpp"]])
            for x in cortiqs + ["llama.cpp"]:
                v = r.get(x, [])
                cells.append(" / ".join(", ".join("%.1f" % p[i] for p in v) for i in (0, 1)) if v else "—")
            for x in cortiqs:
                v = r.get(x, [])
                cp, ct = mean([p[0] for p in v]), mean([p[1] for p in v])
                cells.append("%.2f / %.2f" % (cp / lp, ct / lt) if v and lp and lt else "—")
            print("| " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])

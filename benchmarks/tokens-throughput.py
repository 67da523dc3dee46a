#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Packed token rows a second: infeed against a standalone gather and a
PyTorch DataLoader with a packing collator, over the same files.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/tokens-throughput.py \\
        build/daemon/infeedd [--tokens 20000000] [--steps 150] [--rounds 5] \\
        [--gather build/benchmarks/tokens-gather \\
         --infeedctl build/client/infeedctl] [--rows 16]

The corpus: documents of log-normal lengths like web text's (median 400
tokens, sigma 1.2, at most 16 x seq_len), uint16 ids, written with
infeed.write_tokens(); seq_len 2048, 16 rows a step (--rows: a larger
device step, e.g. 64 or 256, where a step's fixed cost of messages is
spread over more tokens; the torch side's batches stay about 16 rows).
Each round, in turn:

- infeed: infeed.TokenLoader (infeedd's workers pack and copy; the
  trainer's process computes labels and cu_seqlens with lm_batch);
- gather: the trainer's own process, no daemon: rows packed once
  (best-fit decreasing, as infeedd), then each step's rows gathered from
  the memory-mapped file into [16, 3, 2048] int32 with numpy, and
  lm_batch, as infeed gives them;
- torch: torch.utils.data.DataLoader, one worker process, shuffled
  documents, batches of 40 documents (about 16 x 2048 tokens) flattened
  by a collator like transformers' DataCollatorWithFlattening (input_ids,
  labels with -100 at each document's start, position_ids).

With --gather and --infeedctl, each round also runs, in turn:

- c_gather: benchmarks/tokens-gather.c, the best standalone gather of the
  same rows in C (the same packing and re-packing each epoch, uint16 ids
  widened from the mapping into int32 rows with their positions and
  segments by the workers' own loop, threads = CPUs), 4 epochs, run both
  ways (rows built in cache and streamed to a step buffer; rows built in
  the step buffer), the better of the two: the limit for infeedd's copy.
  It leaves out what only a daemon does (the pool's messages, the ring,
  the trainer's hand-back): that is the cost measured;
- infeed_bench: `infeedctl bench` on the same dataset (16 rows a step,
  shuffled, 5 epochs or --bench-epochs; the steady later epochs' rows a second, times the
  real tokens a row), the loader alone, with no lm_batch.

Prints real tokens a second (padding not counted) for each, the median of
the rounds, the ratios, the load average before and after, and infeed's
packing efficiency; --json one line.  With --gather, also the CPU ratio:
the C gather's CPU seconds a token over infeedd's (the daemon, its fork
server and workers, from /proc) in infeed_bench, which a loaded machine
bends less than the wall-clock ratio.
"""

import argparse
import bisect
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import infeed

SEQ = 2048
ROWS = 16


def corpus(tokens, seed=0):
    rng = np.random.default_rng(seed)
    docs, n = [], 0
    while n < tokens:
        k = int(min(max(1, 400 * np.exp(1.2 * rng.standard_normal())),
                    16 * SEQ))
        docs.append(rng.integers(1, 50000, k, dtype=np.uint16))
        n += k
    return docs


def bfd(lengths):
    """Rows of (start, len) pieces, best-fit decreasing, as infeedd."""
    pieces, start = [], 0
    for n in lengths:
        for off in range(0, n, SEQ):
            pieces.append((start + off, min(SEQ, n - off)))
        start += n
    rows, rooms = [], []
    for s, n in sorted(pieces, key=lambda p: -p[1]):
        i = bisect.bisect_left(rooms, (n, -1))
        if i < len(rooms):
            room, r = rooms.pop(i)
        else:
            room, r = SEQ, len(rows)
            rows.append([])
        rows[r].append((s, n))
        if room - n > 0:
            bisect.insort(rooms, (room - n, r))
    return rows


def run_infeed(sock, steps):
    loader = infeed.TokenLoader(None, "web", batch_size=ROWS, shuffle=True,
                                seed=1, socket=sock, share=False)
    toks, t0 = 0, time.monotonic()
    for k, batch in enumerate(loader):
        toks += int((batch["segment_ids"] != 0).sum())
        if k + 1 == steps:
            break
    dt = time.monotonic() - t0
    loader.close()
    return toks / dt


def run_gather(tokfile, rows, steps):
    tok = np.memmap(tokfile, np.uint16, "r")
    order = np.random.default_rng(1).permutation(len(rows))
    ar = np.arange(SEQ, dtype=np.int32)
    toks, t0 = 0, time.monotonic()
    for k in range(steps):
        out = np.empty((ROWS, 3, SEQ), np.int32)
        for b, r in enumerate(order[k * ROWS:(k + 1) * ROWS]):
            at = 0
            for seg, (s, n) in enumerate(rows[r], 1):
                out[b, 0, at:at + n] = tok[s:s + n]
                out[b, 1, at:at + n] = ar[:n]
                out[b, 2, at:at + n] = seg
                at += n
            out[b, 0, at:] = 0
            out[b, 1, at:] = ar[:SEQ - at]
            out[b, 2, at:] = 0
            toks += at
        infeed.lm_batch(torch.from_numpy(out))
    return toks / (time.monotonic() - t0)


class Docs(torch.utils.data.Dataset):
    def __init__(self, tokfile, bounds):
        self.tokfile, self.bounds, self.tok = tokfile, bounds, None

    def __len__(self):
        return len(self.bounds) - 1

    def __getitem__(self, i):
        if self.tok is None:
            self.tok = np.memmap(self.tokfile, np.uint16, "r")
        a, b = self.bounds[i], self.bounds[i + 1]
        return torch.from_numpy(self.tok[a:b].astype(np.int64))


def flatten(docs):
    """DataCollatorWithFlattening's output, from tensors."""
    ids = torch.cat(docs)
    pos = torch.cat([torch.arange(len(d)) for d in docs])
    labels = ids.clone()
    labels[pos == 0] = -100
    return {"input_ids": ids[None], "labels": labels[None],
            "position_ids": pos[None]}


def run_torch(tokfile, bounds, steps):
    loader = torch.utils.data.DataLoader(
        Docs(tokfile, bounds), batch_size=40, shuffle=True, num_workers=1,
        collate_fn=flatten, generator=torch.Generator().manual_seed(1))
    toks, t0 = 0, time.monotonic()
    for k, batch in enumerate(loader):
        toks += batch["input_ids"].shape[1]
        if k + 1 == steps:
            break
    return toks / (time.monotonic() - t0)


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tree_cpu(root):
    """CPU seconds of process @root and its descendants, from /proc."""
    kids, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(f[1]), []).append(int(d))
        cpu[int(d)] = (int(f[11]) + int(f[12])) / tick
    todo, total = [root], 0.0
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo += kids.get(p, [])
    return total


def run_c_gather(gather, tmp, repack):
    """The better of both writes' tokens a second, and its CPU a token."""
    best = (0, 0)
    for write in ("stream", "direct"):
        c0 = child_cpu()
        out = subprocess.run([gather, str(tmp / "web.bin"),
                              str(tmp / "web.idx"), "--rows", str(ROWS),
                              "--epochs", "4", "--repack", repack,
                              "--write", write, "--json"], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out)
        toks = r["tokens_per_s"]
        cpu = (child_cpu() - c0) / (toks / r["rows_per_s"] * r["steps"] *
                                    ROWS)
        best = max(best, (toks, -cpu))
    return best[0], -best[1]


def run_bench(infeedctl, sock, tokens_per_row, pid, buffer_size, epochs):
    """infeedctl bench's tokens a second, and infeedd's CPU a token."""
    c0 = tree_cpu(pid)
    out = subprocess.run([infeedctl, "--socket", sock, "bench", "--dataset",
                          "web", "--batch-size", str(ROWS), "--shuffle",
                          "--seed", "1", "--epochs", str(epochs),
                          "--buffer-size", str(buffer_size), "--json"],
                         check=True, capture_output=True, text=True).stdout
    cpu = tree_cpu(pid) - c0
    r = json.loads(out)
    return (r["later_epochs_items_per_s"] * tokens_per_row,
            cpu / (r["items"] * tokens_per_row))


def main():
    global ROWS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("infeedd")
    ap.add_argument("--tokens", type=int, default=20_000_000)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gather", help="build/benchmarks/tokens-gather")
    ap.add_argument("--infeedctl", help="build/client/infeedctl")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--buffer-size", type=int, default=3,
                    help="infeed_bench's slots (infeedctl bench "
                    "--buffer-size; 3, its default)")
    ap.add_argument("--repack", default="epoch",
                    help="the dataset's repack = (epoch, or none)")
    ap.add_argument("--bench-epochs", type=int, default=5,
                    help="infeed_bench's epochs (5; more for a CPU figure "
                    "less bent by /proc's 10 ms ticks)")
    ap.add_argument("--rows", type=int, default=ROWS,
                    help="rows a step (combined batch size; 16)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ROWS = args.rows
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tokens-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        docs = corpus(args.tokens)
        infeed.write_tokens(tmp / "web", docs, "uint16")
        lengths = [len(d) for d in docs]
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        rows = bfd(lengths)
        del docs
        eff_gather = sum(lengths) / (len(rows) * SEQ)
        conf = tmp / "infeedd.conf"
        conf.write_text(
            f"[infeedd]\nworkers = {args.workers}\nmemory_budget = 1G\n"
            f"\n[dataset web]\ntype = tokens\npath = {tmp}/web.bin\n"
            f"index = {tmp}/web.idx\nseq_len = {SEQ}\n"
            f"repack = {args.repack}\n")
        sock = str(tmp / "infeedd.sock")
        proc = subprocess.Popen([args.infeedd, "--config", str(conf),
                                 "--socket", sock],
                                stderr=open(tmp / "infeedd.log", "wb"))
        try:
            for _ in range(3000):
                if os.path.exists(sock):
                    break
                time.sleep(0.01)
            info = infeed.TokenLoader(None, "web", socket=sock).info
            # At most an epoch's steps (a large --rows has fewer).
            args.steps = min(args.steps, len(rows) // ROWS)
            eff = sum(lengths) / (info["steps_per_epoch"] * SEQ)
            res = {"infeed": [], "gather": [], "torch": []}
            c = args.gather is not None and args.infeedctl is not None
            if c:
                res.update({"c_gather": [], "infeed_bench": []})
                cpu = {"c_gather": [], "infeed_bench": []}
            load = [os.getloadavg()[0]]
            for _ in range(args.rounds):
                if c:
                    for k, (t, u) in (
                            ("c_gather", run_c_gather(args.gather, tmp,
                                                      args.repack)),
                            ("infeed_bench", run_bench(
                                args.infeedctl, sock,
                                sum(lengths) / info["steps_per_epoch"],
                                proc.pid, args.buffer_size,
                                args.bench_epochs))):
                        res[k].append(t)
                        cpu[k].append(u)
                res["infeed"].append(run_infeed(sock, args.steps))
                res["gather"].append(run_gather(tmp / "web.bin", rows,
                                                args.steps))
                res["torch"].append(run_torch(tmp / "web.bin", bounds,
                                              args.steps))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    med = {k: statistics.median(v) for k, v in res.items()}
    out = {"tokens": int(bounds[-1]), "documents": len(lengths),
           "repack": args.repack,
           "seq_len": SEQ, "rows_per_step": ROWS, "steps": args.steps,
           "rounds": args.rounds, "packing_efficiency": round(eff, 5),
           "gather_packing_efficiency": round(eff_gather, 5),
           "padding_efficiency": round(sum(lengths) / sum(
               -(-n // SEQ) * SEQ for n in lengths), 4),
           **{f"{k}_tokens_per_s": round(v) for k, v in med.items()},
           "infeed_over_gather": round(med["infeed"] / med["gather"], 2),
           "infeed_over_torch": round(med["infeed"] / med["torch"], 2),
           **({"infeed_bench_over_c_gather": round(
               med["infeed_bench"] / med["c_gather"], 2),
               "infeed_bench_cpu_ratio": round(
                   statistics.median(cpu["c_gather"]) /
                   statistics.median(cpu["infeed_bench"]), 2),
               "cpu_ns_per_token": {k: [round(x * 1e9, 3) for x in v]
                                    for k, v in cpu.items()}}
              if c else {}),
           "rounds_all": {k: [round(x) for x in v] for k, v in res.items()},
           "load_average_before": load[0],
           "load_average_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:28} {v}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A tiny GPT trained on the CPU from packed token rows served by infeedd.

The corpus is this machine's Python standard library, one module a
document, tokenized by bytes (vocabulary 256), written with
infeed.write_tokens() into a tokens dataset; infeedd packs the documents
into rows of --seq-len and infeed.TokenLoader hands each step over as
input_ids, position_ids, segment_ids and shifted labels.  Attention is
causal and kept inside each document (a block-diagonal mask from
segment_ids), positions restart at each document, and no label crosses one.

    /usr/bin/python3 examples/tokens-gpt.py --infeedd build/daemon/infeedd

starts its own infeedd on a private socket (or --socket S --dataset NAME
uses a running one whose catalogue has the dataset), trains --steps steps
and prints the loss and the tokens a second (real tokens, padding not
counted), and with --json one JSON line.
"""

import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import infeed


def corpus(limit_bytes):
    """The standard library's modules as byte strings, in name order."""
    root = pathlib.Path(os.__file__).parent
    docs, size = [], 0
    for p in sorted(root.glob("*.py")):
        b = p.read_bytes()
        if b:
            docs.append(list(b))
            size += len(b)
        if size >= limit_bytes:
            break
    return docs


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(),
                                 nn.Linear(4 * d, d))

    def forward(self, x, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.out(y.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, d=128, layers=2, heads=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, position_ids, segment_ids):
        T = input_ids.shape[1]
        # Causal, and only within the token's own document.
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        same = segment_ids[:, :, None] == segment_ids[:, None, :]
        mask = (causal & same)[:, None]
        x = self.tok(input_ids) + self.pos(position_ids)
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def start_infeedd(exe, tmp, seq_len, limit_bytes):
    """Write the dataset and a catalogue, start infeedd; (proc, socket)."""
    _, _, dtype = infeed.write_tokens(tmp / "stdlib", corpus(limit_bytes),
                                      "uint16")
    conf = tmp / "infeedd.conf"
    conf.write_text(f"[infeedd]\nworkers = 1\nmemory_budget = 256M\n"
                    f"\n[dataset stdlib]\ntype = tokens\n"
                    f"path = {tmp}/stdlib.bin\nindex = {tmp}/stdlib.idx\n"
                    f"dtype = {dtype}\nseq_len = {seq_len}\n")
    sock = str(tmp / "infeedd.sock")
    log = open(tmp / "infeedd.log", "wb")
    proc = subprocess.Popen([exe, "--config", str(conf), "--socket", sock],
                            stderr=log)
    for _ in range(500):
        if os.path.exists(sock):
            return proc, sock
        time.sleep(0.01)
    proc.kill()
    sys.exit(f"infeedd did not start; see {tmp}/infeedd.log")


def train(args, sock, dataset):
    torch.manual_seed(0)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
    loader = infeed.TokenLoader(None, dataset, batch_size=args.batch_size,
                                shuffle=True, seed=0, socket=sock)
    seq_len = loader.seq_len
    model = GPT(256, seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, tokens, wait, step = [], 0, 0.0, 0
    t0 = time.monotonic()
    while step < args.steps:
        it = iter(loader)
        while step < args.steps:
            w = time.monotonic()
            try:
                batch = next(it)
            except StopIteration:
                break
            wait += time.monotonic() - w
            logits = model(batch["input_ids"], batch["position_ids"],
                           batch["segment_ids"])
            loss = F.cross_entropy(logits.flatten(0, 1),
                                   batch["labels"].flatten(),
                                   ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tokens += int((batch["segment_ids"] != 0).sum())
            losses.append(loss.item())
            step += 1
            if not args.json and step % 50 == 0:
                print(f"step {step}: loss {loss.item():.3f}")
    loader.close()
    secs = time.monotonic() - t0
    return {"steps": step, "seq_len": seq_len,
            "batch_size": args.batch_size,
            "first_loss": sum(losses[:10]) / len(losses[:10]),
            "last_loss": sum(losses[-10:]) / len(losses[-10:]),
            "uniform_loss": math.log(256), "tokens": tokens,
            "seconds": round(secs, 2), "data_wait_s": round(wait, 3),
            "tokens_per_s": round(tokens / secs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--infeedd", help="start this infeedd binary")
    ap.add_argument("--socket", help="a running infeedd's socket")
    ap.add_argument("--dataset", default="stdlib")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--corpus-bytes", type=int, default=4 << 20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if (args.infeedd is None) == (args.socket is None):
        ap.error("give --infeedd (start one) or --socket (use a running one)")
    proc = None
    with tempfile.TemporaryDirectory(prefix="tokens-gpt-") as tmp:
        sock = args.socket
        if args.infeedd:
            proc, sock = start_infeedd(args.infeedd, pathlib.Path(tmp),
                                       args.seq_len, args.corpus_bytes)
        try:
            r = train(args, sock, args.dataset)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    if args.json:
        print(json.dumps(r))
    else:
        print(f"{r['steps']} steps of {r['batch_size']} x {r['seq_len']}: "
              f"loss {r['first_loss']:.3f} -> {r['last_loss']:.3f} "
              f"(uniform {r['uniform_loss']:.3f}); {r['tokens_per_s']} "
              f"tokens/s, {r['data_wait_s']} s of {r['seconds']} s waiting "
              f"for data")


if __name__ == "__main__":
    main()

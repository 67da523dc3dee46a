# SPDX-License-Identifier: MIT
"""Token datasets end to end: files written by infeed.write_tokens(),
packed by the real infeedd (type = tokens), read through
infeed.TokenLoader, each batch checked against a pure-Python reference:
every token of the files once an epoch, each segment a piece of one
document, positions restarting at each piece, labels never across a
document, cu_seqlens; the same stream for the same seed, and after a
resume mid-epoch."""

import hashlib
import json
import os
import random
import signal
import subprocess
import time

import numpy as np
import pytest

import infeed
from conftest import Daemon

SEQ = 64


def documents(n=300, seed=1):
    """@n documents; token t of the file has id t + 1 (unique), some
    longer than SEQ."""
    rng = random.Random(seed)
    docs, t = [], 1
    for _ in range(n):
        k = min(int(rng.lognormvariate(3.3, 1.0)) + 1, 5 * SEQ)
        docs.append(list(range(t, t + k)))
        t += k
    return docs


def section(name, prefix, dtype, seq=SEQ):
    return (f"\n[dataset {name}]\ntype = tokens\npath = {prefix}.bin\n"
            f"index = {prefix}.idx\ndtype = {dtype}\nseq_len = {seq}\n")


@pytest.fixture
def tok(tmp_path):
    docs = documents()
    b, i, dtype = infeed.write_tokens(tmp_path / "web", docs, "uint32")
    d = Daemon(tmp_path, section("tok", tmp_path / "web", dtype))
    d.docs = docs
    yield d
    rc = d.stop()
    assert rc == 0, d.log_text()


def reference(rows, labels="shifted"):
    """lm_batch's arrays by plain loops over @rows (lists of [ids, pos,
    seg] lists)."""
    B, T = len(rows), len(rows[0][0])
    lab, cu = [], []
    for b, (ids, pos, seg) in enumerate(rows):
        for i in range(T):
            if labels == "shifted":
                ok = i + 1 < T and seg[i] != 0 and seg[i + 1] == seg[i]
                lab.append(ids[i + 1] if ok else -100)
            else:
                lab.append(ids[i] if pos[i] != 0 and seg[i] != 0 else -100)
            if pos[i] == 0:
                cu.append(b * T + i)
    cu.append(B * T)
    return lab, cu


def check_rows(rows, docs, seen, seq=SEQ):
    """Each segment is one piece of one document: consecutive ids from the
    document's start or a multiple of @seq into it, positions from 0."""
    start = {}
    for d in docs:
        for k in range(0, len(d), seq):
            start[d[k]] = min(seq, len(d) - k)
    for ids, pos, seg in rows:
        assert len(ids) == seq
        i = 0
        while i < seq:
            if seg[i] == 0:      # padding to the row's end
                assert all(s == 0 for s in seg[i:]), seg
                assert all(t == 0 for t in ids[i:])
                assert pos[i:] == list(range(seq - i))
                break
            assert pos[i] == 0 and ids[i] in start, (ids[i], pos[i])
            n = start[ids[i]]
            assert ids[i:i + n] == list(range(ids[i], ids[i] + n))
            assert pos[i:i + n] == list(range(n))
            assert set(seg[i:i + n]) == {seg[i]}
            for t in ids[i:i + n]:
                assert t not in seen, f"token {t} twice in an epoch"
                seen.add(t)
            i += n


def epoch_stream(loader, check=None):
    """Copies of the batches' input_ids, and a hash of them; @check(batch)
    sees each batch first (a batch holds its ring slot: none is kept)."""
    h, out = hashlib.sha256(), []
    for batch in loader:
        if check is not None:
            check(batch)
        ids = np.array(batch["input_ids"])
        h.update(ids.tobytes())
        out.append(ids)
    return out, h.hexdigest()


def loader_of(d, name="tok", options=None, **kw):
    """infeed.TokenLoader of @name on daemon @d."""
    return infeed.TokenLoader(options, name, socket=d.socket, **kw)


def rows_of(batch):
    """A batch's rows as [ids, pos, seg] lists, for check_rows()."""
    ids, pos, seg = (batch[k] for k in ("input_ids", "position_ids",
                                        "segment_ids"))
    return [[ids[r].tolist(), pos[r].tolist(), seg[r].tolist()]
            for r in range(ids.shape[0])]


def assert_resumes(make, whole, steps, epoch=0):
    """A loader of @make() stopped @steps steps into @epoch and another
    resumed from its state give, together, the stream @whole."""
    a = make()
    a.set_epoch(epoch)
    it = iter(a)
    first = [np.array(next(it)["input_ids"]) for _ in range(steps)]
    state = a.state_dict()
    a.close()
    b = make()
    b.load_state_dict(state)
    rest, _ = epoch_stream(b)
    b.close()
    got = first + rest
    assert len(got) == len(whole)
    for x, y in zip(got, whole):
        assert x.shape == y.shape and np.array_equal(x, y)


class serving:
    """Daemon(@tmp, @extra) for a with block, which must stop cleanly."""

    def __init__(self, tmp, extra):
        self.d = Daemon(tmp, extra)

    def __enter__(self):
        return self.d

    def __exit__(self, *exc):
        rc = self.d.stop()
        assert rc == 0, self.d.log_text()


def test_every_token_once_in_pieces_with_reference_arrays(tok):
    loader = loader_of(tok, batch_size=4, shuffle=True, seed=5,
                       drop_last=False)
    assert loader.seq_len == SEQ
    seen = set()
    total = sum(len(d) for d in tok.docs)
    rows_all = 0

    def check(batch):
        nonlocal rows_all
        ids, pos, seg = (batch[k] for k in ("input_ids", "position_ids",
                                            "segment_ids"))
        assert ids.dtype == __import__("torch").int32
        assert ids.shape == pos.shape == seg.shape and ids.shape[1] == SEQ
        rows = rows_of(batch)
        rows_all += len(rows)
        check_rows(rows, tok.docs, seen)
        lab, cu = reference(rows)
        assert batch["labels"].flatten().tolist() == lab
        assert batch["cu_seqlens"].tolist() == cu
        assert batch["max_seqlen"] == max(np.diff(cu))
        # Views of the step, not copies.
        assert ids.data_ptr() + 4 * SEQ == pos.data_ptr()
    epoch_stream(loader, check)
    assert len(seen) == total, f"{total - len(seen)} tokens missing"
    # Packed, not padded: nearly every slot holds a token.
    eff = total / (rows_all * SEQ)
    print(f"packing efficiency {eff:.4f} over {rows_all} rows")
    assert eff > 0.9
    loader.close()


def test_same_seed_same_stream_and_resume_mid_epoch(tok):
    def loader():
        return loader_of(tok, batch_size=3, shuffle=True, seed=11,
                         share=False)
    a = loader()
    whole, h = epoch_stream(a)
    a.close()
    b = loader()
    _, h2 = epoch_stream(b)
    b.close()
    assert h2 == h
    # Epoch 0 again: stop after 4 steps, save, resume in a new loader.
    assert_resumes(loader, whole, 4)
    # Another seed, another order.
    d = loader_of(tok, batch_size=3, shuffle=True, seed=12)
    _, h3 = epoch_stream(d)
    d.close()
    assert h3 != h


def test_each_epoch_packs_anew_every_token_once_and_resumes(tok):
    """repack = epoch (the default): epoch 1 groups other documents in its
    rows than epoch 0, each epoch every token once; a run resumed in
    epoch 1 gets epoch 1's rows."""
    def loader():
        return loader_of(tok, batch_size=4, shuffle=True, seed=5,
                         drop_last=False, share=False)
    total = sum(len(d) for d in tok.docs)
    a = loader()
    groups, streams = [], []
    for epoch in (0, 1):
        a.set_epoch(epoch)
        seen, multi = set(), set()

        def check(batch):
            rows = rows_of(batch)
            check_rows(rows, tok.docs, seen)
            for r_ids, r_pos, r_seg in rows:
                firsts = [t for t, p, s in zip(r_ids, r_pos, r_seg)
                          if p == 0 and s != 0]
                if len(firsts) > 1:
                    multi.add(frozenset(firsts))
        stream, _ = epoch_stream(a, check)
        assert len(seen) == total, f"epoch {epoch}: {total - len(seen)} " \
            "tokens missing"
        groups.append(multi)
        streams.append(stream)
    a.close()
    same = len(groups[0] & groups[1])
    print(f"rows of several pieces: {len(groups[0])} in epoch 0, "
          f"{len(groups[1])} in epoch 1, {same} alike")
    assert len(groups[0]) == len(groups[1]) > 20
    assert same < len(groups[0]) / 2, (same, len(groups[0]))
    # Resume 3 steps into epoch 1.
    assert_resumes(loader, streams[1], 3, epoch=1)


def _status(d):
    out = subprocess.run([os.environ["INFEEDCTL"], "--socket", d.socket,
                          "status", "--json"], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def _wait_log(d, text, count=1):
    for _ in range(500):
        if d.log_text().count(text) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"no '{text}' in the log:\n{d.log_text()}")


def test_packing_is_charged_to_memory_budget(tmp_path):
    """A tokens dataset's packing counts in memory_used while it is open
    (twice: the daemon's and the fork server's); a new section whose
    packing does not fit memory_budget is refused saying so, the others
    served; a reload that drops the dataset gives its memory back."""
    docs = documents(3000)
    infeed.write_tokens(tmp_path / "web", docs, "uint32")
    with serving(tmp_path, "") as d:
        base = _status(d)["memory_used"]
        sec = section("tok", tmp_path / "web", "uint32")
        text = d.conf.read_text()
        d.conf.write_text(text + sec)
        d.proc.send_signal(signal.SIGHUP)
        _wait_log(d, "reloaded")
        used = _status(d)["memory_used"]
        pieces = sum((len(x) + SEQ - 1) // SEQ for x in docs)
        print(f"memory_used {base} B without, {used} B with {pieces} "
              "pieces")
        # 36 bytes a piece re-packed, 8 a row, twice.
        assert used - base >= 2 * 36 * pieces
        assert used - base <= 2 * (36 + 8) * pieces + 64
        # Room for tok, not for another packing of the same files.
        d.conf.write_text(
            text.replace("memory_budget = 256M",
                         f"memory_budget = {used + 65536}") +
            sec + section("tok2", tmp_path / "web", "uint32", seq=32))
        d.proc.send_signal(signal.SIGHUP)
        _wait_log(d, "reloaded", 2)
        assert _status(d)["memory_used"] == used
        log = d.log_text()
        # Refused before it is packed (the reader's lower bound) or after.
        assert "dataset 'tok2' refused: " in log, log
        assert "it keeps" in log
        assert "raise memory_budget" in log
        with pytest.raises(infeed.NotFoundError):
            next(iter(loader_of(d, "tok2", batch_size=2)))
        a = loader_of(d, batch_size=2)
        next(iter(a))
        a.close()
        # Dropped: given back.
        d.conf.write_text(text)
        d.proc.send_signal(signal.SIGHUP)
        _wait_log(d, "reloaded", 3)
        assert _status(d)["memory_used"] == base


def _ctl(*args):
    return subprocess.run([os.environ["INFEEDCTL"], "tokens", *map(str, args)],
                          capture_output=True, text=True)


def test_infeedctl_tokens_convert_and_index(tmp_path):
    """infeedctl tokens convert (JSON lines of ids) writes what
    write_tokens() writes; tokens index of a nanoGPT-style .bin (each
    document ended by its eot) writes the index of its documents, which
    infeedd serves; bad lines are refused naming the line and the fix."""
    docs = documents(200)
    infeed.write_tokens(tmp_path / "ref", docs, "uint32")
    lines = [json.dumps(d) if i % 2 else json.dumps({"input_ids": d})
             for i, d in enumerate(docs)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    r = _ctl("convert", "--dtype", "uint32", tmp_path / "a.jsonl",
             tmp_path / "a")
    assert r.returncode == 1 and "a.jsonl:1: column 1: expected a JSON " \
        "array" in r.stderr and "--key NAME" in r.stderr, r.stderr
    (tmp_path / "b.jsonl").write_text(
        "\n".join(json.dumps({"input_ids": d}) for d in docs) + "\n\n")
    r = _ctl("convert", "--dtype", "uint32", "--key", "input_ids",
             tmp_path / "b.jsonl", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert f"{len(docs)} documents" in r.stdout
    for ext in ("bin", "idx"):
        assert (tmp_path / f"b.{ext}").read_bytes() == \
            (tmp_path / f"ref.{ext}").read_bytes()
    # Ids over uint16 are refused for uint16, saying which line.
    (tmp_path / "c.jsonl").write_text("[1, 2]\n[3, 70000]\n")
    r = _ctl("convert", tmp_path / "c.jsonl", tmp_path / "c")
    assert r.returncode == 1 and "c.jsonl:2: id 70000 does not fit " \
        "uint16 (up to 65535); use --dtype uint32" in r.stderr, r.stderr
    assert not (tmp_path / "c.bin").exists()
    # nanoGPT's layout: uint16, each document ended by 50256.
    eot = 50256
    ids = []
    for d in docs:
        ids += [t % 50000 for t in d] + [eot]
    np.array(ids[:-1], dtype=np.uint16).tofile(tmp_path / "gpt.bin")
    r = _ctl("index", "--eot", eot, tmp_path / "gpt.bin")
    assert r.returncode == 0, r.stderr
    idx = np.fromfile(tmp_path / "gpt.idx", dtype=np.uint64)
    ends = [0]
    for d in docs:
        ends.append(ends[-1] + len(d) + 1)
    ends[-1] -= 1       # the last document ends with the file
    assert idx.tolist() == ends
    r = _ctl("index", tmp_path / "gpt.bin")
    assert r.returncode == 2 and "give --eot" in r.stderr
    with serving(tmp_path, section("gpt", tmp_path / "gpt", "uint16")) as d:
        loader = loader_of(d, "gpt", batch_size=4, drop_last=False)
        n = sum(int((np.array(b["segment_ids"]) != 0).sum())
                for b in loader)
        loader.close()
        assert n == len(ids) - 1


def test_numpy_output_and_hugging_face_labels(tok):
    loader = loader_of(tok, batch_size=2, labels="hf", output="numpy")
    for k, batch in enumerate(loader):
        if k == 5:
            break
        ids = batch["input_ids"]
        rows = [[ids[b].tolist(), batch["position_ids"][b].tolist(), None]
                for b in range(ids.shape[0])]
        # Segments as the padding marks them (ids are never 0 here).
        lab, cu = reference(
            [[r[0], r[1], [1 if t else 0 for t in r[0]]] for r in rows],
            "hf")
        assert batch["labels"].flatten().tolist() == lab
        assert batch["cu_seq_lens_q"].tolist() == cu
        assert batch["max_length_k"] == max(np.diff(cu))
        assert set(batch) >= {"input_ids", "position_ids", "labels",
                              "cu_seq_lens_q", "cu_seq_lens_k",
                              "max_length_q", "max_length_k"}
    loader.close()


def test_a_bad_tokens_section_is_refused_naming_the_file(tmp_path):
    infeed.write_tokens(tmp_path / "ok", [[1, 2, 3], [4, 5]])
    (tmp_path / "ok.idx").write_bytes(np.asarray([0, 3, 4], np.uint64)
                                      .tobytes())
    with serving(tmp_path, section("bad", tmp_path / "ok", "uint16")) as d:
        log = d.log_text()
        assert "dataset 'bad' refused" in log and "ok.idx" in log, log
        assert "ends at token 4, but" in log
        # The daemon carries on: the other datasets are served.
        names = [x["name"] for x in infeed.datasets(d.socket)]
        assert "raw" in names and "bad" not in names
        with pytest.raises(ValueError, match="not a tokens dataset"):
            loader_of(d, "raw").seq_len


def test_write_tokens_and_text(tmp_path):
    b, i, dtype = infeed.write_tokens(tmp_path / "a", [[1, 2], [70000]])
    assert dtype == "uint32"
    assert np.fromfile(b, np.uint32).tolist() == [1, 2, 70000]
    assert np.fromfile(i, np.uint64).tolist() == [0, 2, 3]
    with pytest.raises(ValueError, match="document 1 is empty"):
        infeed.write_tokens(tmp_path / "e", [[1], []])
    (tmp_path / "t.txt").write_text("ab c\n\n\n\nd\n\nefg\n")
    b, i, dtype = infeed.write_tokens_text(
        tmp_path / "t", tmp_path / "t.txt",
        lambda s: [ord(c) for c in s.strip()], eot=0)
    assert dtype == "uint16"
    assert np.fromfile(i, np.uint64).tolist() == [0, 5, 7, 11]
    assert np.fromfile(b, np.uint16)[:5].tolist() == [97, 98, 32, 99, 0]


def test_the_tiny_gpt_example_learns(tmp_path):
    """examples/tokens-gpt.py, cut short, through its own infeedd."""
    import json
    import os
    import pathlib
    import subprocess
    import sys
    pytest.importorskip("torch")
    ex = pathlib.Path(__file__).resolve().parents[2] / "examples" / \
        "tokens-gpt.py"
    out = subprocess.run(
        [sys.executable, str(ex), "--infeedd", os.environ["INFEEDD"],
         "--steps", "40", "--batch-size", "8", "--corpus-bytes", "300000",
         "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.splitlines()[-1])
    assert r["steps"] == 40 and r["tokens"] > 0.9 * 40 * 8 * r["seq_len"]
    # Bytes: uniform is ln 256 = 5.5; 40 steps get well below it.
    assert r["last_loss"] < r["first_loss"] < r["uniform_loss"] + 0.5, r


def test_elastic_resume_eight_then_six_processes_every_token_once(tok):
    """8 processes take 3 steps each and save; 6 resume from that state
    and finish the epoch: every token of the files comes exactly once
    (rows are samples: the sampler's elastic rule holds for them)."""
    def loader(pid, count):
        o = infeed.Options()
        o.Distributed.configureProcessId(pid, count)
        return loader_of(tok, "tok", o, batch_size=2, shuffle=True, seed=4,
                         drop_last=False, output="numpy", share=False)
    seen = []

    def take(batch):
        seg = batch["segment_ids"]
        seen.extend(batch["input_ids"][seg != 0].tolist())
    states = []
    for pid in range(8):
        a = loader(pid, 8)
        it = iter(a)
        for _ in range(3):
            take(next(it))
        states.append(a.state_dict())
        a.close()
    assert all(s == states[0] for s in states)
    for pid in range(6):
        b = loader(pid, 6)
        b.load_state_dict(states[0])
        for batch in b:
            take(batch)
        b.close()
    total = sum(len(d) for d in tok.docs)
    assert len(seen) == len(set(seen)), "a token came twice"
    assert sorted(seen) == list(range(1, total + 1))


@pytest.fixture
def mixd(tmp_path):
    """infeedd with two tokens datasets (ids from 1, and from 10^6) and a
    3:1 mix of them, 600 rows."""
    docs = documents()
    other = [[10 ** 6 + t for t in d] for d in documents(200, seed=2)]
    infeed.write_tokens(tmp_path / "a", docs, "uint32")
    infeed.write_tokens(tmp_path / "b", other, "uint32")
    d = Daemon(tmp_path, section("ta", tmp_path / "a", "uint32") +
               section("tb", tmp_path / "b", "uint32") +
               "\n[dataset blend]\ntype = mix\nsources = ta, tb\n"
               "weights = 3, 1\nsamples = 600\nseed = 1\n")
    d.docs = {"ta": docs, "tb": other}
    yield d
    rc = d.stop()
    assert rc == 0, d.log_text()


def mix_rows(loader, resume_every=None, make=None):
    """Each row's first token, in order; with @resume_every, a new loader
    (@make()) resumes from the last's state every that many steps."""
    out, k = [], 0
    while True:
        for batch in loader:
            out += [int(r[0]) for r in batch["input_ids"]]
            k += 1
            if resume_every and k % resume_every == 0:
                break
        else:
            loader.close()
            return out
        state = loader.state_dict()
        loader.close()
        loader = make()
        loader.load_state_dict(state)


def test_mix_proportions_resume_and_elastic(mixd):
    def make(pid=0, count=1):
        o = infeed.Options()
        o.Distributed.configureProcessId(pid, count)
        return loader_of(mixd, "blend", o, batch_size=4, shuffle=False,
                         drop_last=False, output="numpy", share=False)
    whole = mix_rows(make())
    assert len(whole) == 600
    src_b = [t >= 10 ** 6 for t in whole]
    # Every window of 25 steps (100 rows): 25 of tb, within one row.
    for i in range(len(whole) - 100 + 1):
        assert 24 <= sum(src_b[i:i + 100]) <= 26, i
    assert sum(src_b) == 150
    # Each source's rows: a source with fewer rows than it is drawn
    # repeats, each of its epochs every row once (a row told by its first
    # token, which is another one each source epoch, re-packed).
    for name, mine in (("ta", [t for t in whole if t < 10 ** 6]),
                       ("tb", [t for t in whole if t >= 10 ** 6])):
        src = loader_of(mixd, name, batch_size=1, shuffle=False)
        per = len(src)
        src.close()
        assert len(mine) > per, name
        for e in range(0, len(mine), per):
            assert len(set(mine[e:e + per])) == len(mine[e:e + per]), name
    # Resumed every 7 steps: the same rows in the same order.
    assert mix_rows(make(), 7, make) == whole
    # 8 processes take 5 steps each, then 6 finish: the same rows.
    got, states = [], []
    for pid in range(8):
        a = make(pid, 8)
        it = iter(a)
        for _ in range(5):
            got += [int(r[0]) for r in next(it)["input_ids"]]
        states.append(a.state_dict())
        a.close()
    for pid in range(6):
        b = make(pid, 6)
        b.load_state_dict(states[0])
        got += mix_rows(b)
    assert sorted(got) == sorted(whole)


def test_trainers_of_one_mixture_share_one_pipeline(mixd):
    """Two trainers of the same mix and seed share one group: its steps
    are filled, and its rows read, once for both (group_steps_filled,
    group_bytes_read: one epoch's), each trainer getting the same rows;
    a third with another seed has a pipeline of its own."""
    def make(seed):
        return loader_of(mixd, "blend", batch_size=4, shuffle=True,
                         seed=seed, drop_last=False, output="numpy")
    a, b, c = make(3), make(3), make(4)
    its = [iter(a), iter(b), iter(c)]
    got = [[np.array(next(it)["input_ids"])] for it in its]
    sessions = _status(mixd)["sessions"]
    groups = sorted(s["group_id"] for s in sessions)
    print("groups", groups)
    assert len(sessions) == 3
    mine = [s for s in sessions if s["group_id"] == groups[1]]
    assert groups[1] != 0 and len(mine) == 2, sessions
    for x, y in zip(its[0], its[1]):
        got[0].append(np.array(x["input_ids"]))
        got[1].append(np.array(y["input_ids"]))
    assert len(got[0]) == len(a) == 150
    for x, y in zip(got[0], got[1]):
        assert np.array_equal(x, y)
    st = [s for s in _status(mixd)["sessions"]
          if s["group_id"] == groups[1]][0]
    row = 3 * SEQ * 4
    print(f"group: {st['group_steps_filled']} steps filled, "
          f"{st['group_bytes_read']} bytes read for 2 trainers of "
          f"{len(a)} steps ({600 * row} bytes an epoch)")
    assert st["group_steps_filled"] <= len(a) + 8    # the ring's lead
    assert st["group_bytes_read"] <= (600 + 8 * 4) * row
    for loader in (a, b, c):
        loader.close()


def test_packing_facts_in_datasets_and_metrics(tmp_path):
    """infeedctl datasets (ListDatasets) and /metrics say a token
    dataset's documents, tokens, packed rows and packing efficiency."""
    import re
    import urllib.request
    docs = documents()
    infeed.write_tokens(tmp_path / "web", docs, "uint32")
    with serving(tmp_path, "metrics_listen = 127.0.0.1:0\n" +
                 section("tok", tmp_path / "web", "uint32")) as d:
        out = subprocess.run([os.environ["INFEEDCTL"], "--socket", d.socket,
                              "datasets", "--json"], capture_output=True,
                             text=True, check=True).stdout
        info = [x for x in json.loads(out) if x["name"] == "tok"][0]
        total = sum(len(x) for x in docs)
        assert info["documents"] == len(docs)
        assert info["tokens"] == total
        eff = total / (info["samples"] * SEQ)
        assert abs(info["packing_efficiency"] - eff) < 1e-4
        assert all("documents" not in x for x in json.loads(out)
                   if x["name"] != "tok")
        text = subprocess.run([os.environ["INFEEDCTL"], "--socket",
                               d.socket, "datasets"], capture_output=True,
                              text=True, check=True).stdout
        assert f"tok: {len(docs)} documents, {total} tokens packed in " \
            f"{info['samples']} rows of {SEQ}: efficiency" in text, text
        for _ in range(100):
            m = re.search(r"metrics on http://127.0.0.1:(\d+)/metrics",
                          d.log_text())
            if m:
                break
            time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}"
                                    "/metrics", timeout=10) as r:
            body = r.read().decode()
        want = {"infeed_tokens_documents": len(docs),
                "infeed_tokens_tokens": total,
                "infeed_tokens_rows": info["samples"]}
        for name, v in want.items():
            assert f'{name}{{dataset="tok"}} {v}\n' in body, body
        line = [x for x in body.splitlines() if x.startswith(
            'infeed_tokens_packing_efficiency{dataset="tok"}')][0]
        assert abs(float(line.split()[1]) - eff) < 1e-5
        print(f"tok: {len(docs)} documents, {total} tokens, "
              f"{info['samples']} rows, efficiency {eff:.4f}")


def test_seq_len_is_checked_at_the_attach(tok):
    """TokenLoader(seq_len=) asks for the dataset's rows: its own is
    served, in one group with a trainer that left seq_len unset (the same
    bytes); one past the largest, or one for a dataset of other samples,
    is refused saying what the dataset has and what to do; 0 or None
    takes the dataset's."""
    a = loader_of(tok, batch_size=2, seed=3, seq_len=SEQ)
    b = loader_of(tok, batch_size=2, seed=3)
    x, y = next(iter(a)), next(iter(b))
    assert x["input_ids"].shape == (2, SEQ)
    assert np.array_equal(x["input_ids"], y["input_ids"])
    groups = [s["group_id"] for s in _status(tok)["sessions"]]
    assert len(groups) == 2 and groups[0] == groups[1] != 0, groups
    a.close()
    b.close()
    c = loader_of(tok, batch_size=2, seq_len=2 ** 21)
    with pytest.raises(infeed.InvalidArgumentError) as e:
        next(iter(c))
    assert f"expected 0 (the dataset's, {SEQ}) or 1 to 1048576 tokens a " \
        "row" in str(e.value), str(e.value)
    c.close()
    with pytest.raises(ValueError):
        infeed.TokenLoader(None, "tok", seq_len=0, socket=tok.socket)
    # A dataset of other samples: refused by infeedd, whatever the client.
    d = loader_of(tok, "raw", infeed.Options(), batch_size=2, seq_len=SEQ)
    with pytest.raises(infeed.InvalidArgumentError) as e:
        next(iter(d))
    assert "is for token datasets" in str(e.value), str(e.value)
    d.close()


def test_seq_len_other_than_the_sections_is_served(tmp_path):
    """Two trainers on the same dataset, one with its section's seq_len
    (64) and one with 128, served by a section over the same files that
    says the same but for seq_len: each gets rows of its length, every
    token once an epoch, no piece across a row, interleaved, the one at
    128 in a group with a trainer of that section; a resume mid-epoch at
    128 gets the rest of the same stream."""
    docs = documents()
    b, i, dtype = infeed.write_tokens(tmp_path / "web", docs, "uint32")
    with serving(tmp_path, section("tok", tmp_path / "web", dtype) +
                 section("tok-128", tmp_path / "web", dtype, 128)) as d:
        total = sum(len(x) for x in docs)
        loaders, seen, its = {}, {}, {}
        for seq in (SEQ, 128):
            loaders[seq] = loader_of(d, batch_size=3, shuffle=True, seed=7,
                                     drop_last=False, seq_len=seq)
            assert loaders[seq].seq_len == seq
            seen[seq], its[seq] = set(), iter(loaders[seq])
        same = loader_of(d, "tok-128", batch_size=3, shuffle=True, seed=7,
                         drop_last=False)
        first = next(iter(same))
        groups = [s["group_id"] for s in _status(d)["sessions"]
                  if s["dataset"] == "tok-128"]
        assert len(groups) == 2 and groups[0] == groups[1] != 0, groups
        live = [SEQ, 128]
        while live:
            for seq in list(live):
                batch = next(its[seq], None)
                if batch is None:
                    live.remove(seq)
                    continue
                assert batch["input_ids"].shape[1] == seq
                if seq == 128 and first is not None:
                    assert np.array_equal(batch["input_ids"],
                                          first["input_ids"])
                    first = None
                check_rows(rows_of(batch), docs, seen[seq], seq)
        for seq in (SEQ, 128):
            assert len(seen[seq]) == total, (seq, total - len(seen[seq]))
            loaders[seq].close()
        same.close()
        # Resume mid-epoch at seq_len 128: the rest of the same stream.
        def loader():
            return loader_of(d, batch_size=3, shuffle=True, seed=7,
                             seq_len=128, share=False)
        a = loader()
        whole, _ = epoch_stream(a)
        a.close()
        assert_resumes(loader, whole, 3)
        assert "packing it at seq_len" not in d.log_text()


def test_a_seq_len_no_section_has_is_packed_on_demand(tmp_path):
    """Two trainers ask 'tok' (seq_len 64) for 96, which no section packs:
    infeedd packs it for them once ('tok/96', a section like tok's but for
    seq_len, opened off the loop as a reload opens one), both share one
    group, and each gets every token once an epoch in exactly the rows of
    a section packed at 96 ('ref'); the packing is charged to
    memory_budget while used and freed once both end; one that the budget
    cannot hold is refused saying so and what to do."""
    docs = documents(3000)
    infeed.write_tokens(tmp_path / "web", docs, "uint32")
    # ref: tok's keys at 96, and window = 0 (the default) so that it is
    # no section of tok's for seq_len 96: the reference packing.
    ref = section("ref", tmp_path / "web", "uint32", 96) + "window = 0\n"
    with serving(tmp_path, section("tok", tmp_path / "web", "uint32") +
                 ref) as d:
        base = _status(d)["memory_used"]

        def make(name="tok", **kw):
            return loader_of(d, name, batch_size=3, shuffle=True, seed=7,
                             drop_last=False, **kw)
        def take(batch):       # copies: a batch holds its ring slot
            return rows_of(batch), np.array(batch["input_ids"])
        a, b = make(seq_len=96), make(seq_len=96)
        its = [iter(a), iter(b)]
        firsts = [take(next(it)) for it in its]
        sessions = _status(d)["sessions"]
        assert [s["dataset"] for s in sessions] == ["tok/96"] * 2, sessions
        assert sessions[0]["group_id"] == sessions[1]["group_id"] != 0
        used = _status(d)["memory_used"]
        print(f"memory_used {base} B before, {used} B with tok/96")
        assert used > base
        assert d.log_text().count("packing it at seq_len 96") == 1
        seen, got = set(), []
        for rows, ids in [firsts[0]] + [take(x) for x in its[0]]:
            assert ids.shape[1] == 96
            check_rows(rows, docs, seen, 96)
            got.append(ids)
        assert len(seen) == sum(len(x) for x in docs)
        other = [firsts[1][1]] + [take(x)[1] for x in its[1]]
        assert len(other) == len(got)
        for x, y in zip(other, got):
            assert np.array_equal(x, y)
        r = make("ref", share=False)
        want, _ = epoch_stream(r)
        r.close()
        assert len(got) == len(want)
        for x, y in zip(got, want):
            assert np.array_equal(x, y)
        a.close()
        b.close()
        _wait_log(d, "dataset 'tok/96': no session uses it; freed")
        _wait_log(d, "reloaded", 2)
        assert _status(d)["memory_used"] == base
        assert "tok/96" not in [x["name"] for x in infeed.datasets(d.socket)]
        # A budget with no room for another packing: refused, with advice.
        text = d.conf.read_text()
        d.conf.write_text(text.replace("memory_budget = 256M",
                                       f"memory_budget = {base + 131072}"))
        d.proc.send_signal(signal.SIGHUP)
        _wait_log(d, "reloaded", 3)
        c = make(seq_len=32)
        with pytest.raises(infeed.ResourceExhaustedError) as e:
            next(iter(c))
        msg = str(e.value)
        print(msg)
        # Refused by the reader before it is packed, or by the catalogue.
        assert "seq_len = 32: 'tok' could not be packed at that seq_len: " \
            in msg and "it keeps" in msg and "raise memory_budget" in msg, msg
        c.close()
        # The daemon carries on: tok at its own seq_len.
        x = make()
        assert next(iter(x))["input_ids"].shape == (3, SEQ)
        x.close()


def test_packings_on_demand_are_bounded(tok):
    """infeedd makes at most 4 packings for trainers' seq_len at a time
    (each is a reload): a fifth seq_len is refused naming those in use
    and what to do, one of those is still served."""
    held = []
    for seq in (16, 24, 32, 40):
        a = loader_of(tok, batch_size=2, seq_len=seq)
        assert next(iter(a))["input_ids"].shape == (2, seq)
        held.append(a)
    b = loader_of(tok, batch_size=2, seq_len=48)
    with pytest.raises(infeed.ResourceExhaustedError) as e:
        next(iter(b))
    msg = str(e.value)
    assert "seq_len = 48: infeedd already holds the 4 packings it makes " \
        "for trainers' seq_len (tok/16, tok/24, tok/32, tok/40); ask for " \
        "one of those, or add a section" in msg, msg
    b.close()
    c = loader_of(tok, batch_size=2, seq_len=32)
    assert next(iter(c))["input_ids"].shape == (2, 32)
    for x in held + [c]:
        x.close()

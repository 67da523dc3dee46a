# SPDX-License-Identifier: MIT
"""Token datasets: the files of infeedd's ``type = tokens`` and the packed
rows it serves, as a language model's training loop takes them.

A tokens dataset is two files (docs/tokens.md): the token ids, one document
after another (uint16 or uint32, host order: nanoGPT's and Megatron's
``.bin``), and an index of N + 1 uint64 offsets, document i being tokens
[index[i], index[i + 1]).  infeedd packs the documents into rows of
``seq_len``; each row arrives as int32 ``[3, seq_len]``: token ids,
position ids (0 at each document's piece) and segment ids (1, 2, ... a
piece, 0 for padding).
"""

import os

from ._loader import DataLoader

__all__ = ["write_tokens", "write_tokens_text", "lm_batch", "TokenLoader"]


def _numpy():
    import numpy
    return numpy


def write_tokens(prefix, documents, dtype=None):
    """Write ``documents`` (an iterable of sequences of token ids) as
    ``PREFIX.bin`` and ``PREFIX.idx``; return ``(bin_path, idx_path,
    dtype)``, ``dtype`` being what the catalogue's ``dtype =`` takes.

    ``dtype`` is ``"uint16"`` or ``"uint32"``; by default uint16, and
    uint32 when an id is over 65535 (the documents are then read twice, so
    pass a list, not a generator, or give ``dtype``).  An empty document
    is refused (the index has no empty document)."""
    np = _numpy()
    prefix = os.fspath(prefix)
    if dtype is None:
        documents = list(documents)
        top = max((int(np.max(d)) for d in documents if len(d)), default=0)
        dtype = "uint16" if top <= 0xffff else "uint32"
    if dtype not in ("uint16", "uint32"):
        raise ValueError(f"dtype must be 'uint16' or 'uint32', not "
                         f"{dtype!r}")
    limit = 0xffff if dtype == "uint16" else 0x7fffffff
    bin_path, idx_path = prefix + ".bin", prefix + ".idx"
    offsets = [0]
    with open(bin_path, "wb") as f:
        for i, doc in enumerate(documents):
            a = np.asarray(doc)
            if a.ndim != 1 or a.size == 0:
                raise ValueError(f"document {i} is empty or not 1-D "
                                 f"(shape {a.shape}); each document is a "
                                 f"non-empty sequence of token ids")
            if a.min() < 0 or a.max() > limit:
                raise ValueError(f"document {i} has an id outside 0.."
                                 f"{limit} ({dtype})")
            f.write(a.astype(dtype).tobytes())
            offsets.append(offsets[-1] + a.size)
    if len(offsets) == 1:
        raise ValueError("no documents: a tokens dataset needs at least one")
    np.asarray(offsets, np.uint64).tofile(idx_path)
    return bin_path, idx_path, dtype


def write_tokens_text(prefix, text_path, tokenize, *, separator="\n\n",
                      eot=None, dtype=None, encoding="utf-8"):
    """Tokenize a text file into ``PREFIX.bin`` and ``PREFIX.idx``:
    documents are the parts of the file between ``separator`` (a blank
    line by default; empty parts are skipped), ``tokenize(str)`` gives a
    document's ids (a Hugging Face tokenizer's ``encode``, tiktoken's
    ``encode_ordinary``, ...), and ``eot``, if given, is appended to each
    document.  Returns what ``write_tokens`` returns."""
    with open(text_path, encoding=encoding) as f:
        text = f.read()
    docs = []
    for part in text.split(separator):
        if part.strip():
            ids = list(tokenize(part))
            if eot is not None:
                ids.append(eot)
            if ids:
                docs.append(ids)
    return write_tokens(prefix, docs, dtype)


def lm_batch(data, labels="shifted"):
    """A language model's batch from a step of packed rows.

    ``data`` is a step's data, ``[B, 3, T]`` int32 (torch or numpy).
    Returns a dict of:

    - ``input_ids``, ``position_ids``, ``segment_ids``: ``[B, T]`` views of
      the step (no copy; strided: each row's three arrays are adjacent);
    - ``labels``: int64 ``[B, T]``; with ``labels="shifted"`` (default)
      ``labels[b, i]`` is ``input_ids[b, i + 1]`` when both tokens are of
      the same piece, else -100 (across documents, into padding, at the
      row's end), for ``cross_entropy(logits.flatten(0, 1),
      labels.flatten())`` as it is;
    - ``cu_seqlens``: int32, the pieces' bounds in the flattened ``B * T``
      tokens, from 0 to ``B * T`` (a row's padding is a piece of its own),
      as flash-attention's varlen kernels take them, and ``max_seqlen``.

    With ``labels="hf"`` the dict is what a Hugging Face causal LM takes as
    ``model(**batch)`` with flash attention 2 (as DataCollatorWithFlattening
    makes it with ``return_flash_attn_kwargs=True``): ``input_ids``,
    ``position_ids``, ``labels`` unshifted (the model shifts them) with
    -100 at each piece's first token and in padding, and
    ``cu_seq_lens_q``, ``cu_seq_lens_k``, ``max_length_q``,
    ``max_length_k``.

    The computed arrays are made with torch's (or numpy's) vectorised
    operations, no Python loop."""
    if labels not in ("shifted", "hf"):
        raise ValueError(f'labels must be "shifted" or "hf", not '
                         f'{labels!r}')
    if len(data.shape) != 3 or data.shape[1] != 3:
        raise ValueError(f"expected a step of a tokens dataset, [B, 3, T]; "
                         f"got shape {tuple(data.shape)}")
    ids, pos, seg = data[:, 0], data[:, 1], data[:, 2]
    B, T = ids.shape
    if type(data).__module__.startswith("torch"):
        import torch
        lab = torch.full((B, T), -100, dtype=torch.int64)
        if labels == "shifted":
            same = (seg[:, 1:] == seg[:, :-1]) & (seg[:, :-1] != 0)
            lab[:, :-1] = torch.where(same, ids[:, 1:].long(),
                                      torch.tensor(-100))
        else:
            keep = (pos != 0) & (seg != 0)
            lab = torch.where(keep, ids.long(), torch.tensor(-100))
        starts = torch.nonzero(pos.reshape(-1) == 0).flatten()
        cu = torch.cat([starts, torch.tensor([B * T])]).to(torch.int32)
    else:
        np = _numpy()
        lab = np.full((B, T), -100, np.int64)
        if labels == "shifted":
            same = (seg[:, 1:] == seg[:, :-1]) & (seg[:, :-1] != 0)
            lab[:, :-1] = np.where(same, ids[:, 1:], -100)
        else:
            lab = np.where((pos != 0) & (seg != 0), ids, -100).astype(
                np.int64)
        starts = np.flatnonzero(pos.reshape(-1) == 0)
        cu = np.append(starts, B * T).astype(np.int32)
    max_seqlen = int((cu[1:] - cu[:-1]).max())
    if labels == "hf":
        return {"input_ids": ids, "position_ids": pos, "labels": lab,
                "cu_seq_lens_q": cu, "cu_seq_lens_k": cu,
                "max_length_q": max_seqlen, "max_length_k": max_seqlen}
    return {"input_ids": ids, "labels": lab, "position_ids": pos,
            "segment_ids": seg, "cu_seqlens": cu, "max_seqlen": max_seqlen}


class TokenLoader(DataLoader):
    """``infeed.DataLoader`` over a tokens dataset whose items are
    ``lm_batch`` dicts: ``input_ids``, ``labels``, ``position_ids``,
    ``segment_ids``, ``cu_seqlens``, ``max_seqlen`` (``labels="hf"``: the
    Hugging Face keys), plus ``epoch`` and ``step``.  ``batch_size`` is in
    rows of ``seq_len`` tokens; shuffle, seed, resume (``state_dict``,
    ``load_state_dict``), elastic resume and sharing are the DataLoader's:
    the packed rows are the dataset's samples.  ``seq_len``: the tokens of a
    row the trainer wants; another than the dataset's section's is served
    by a section over the same files that says the same but for seq_len
    (docs/tokens.md), or refused saying what to add; None takes the
    dataset's."""

    def __init__(self, options, dataset, batch_size=1, *, labels="shifted",
                 seq_len=None, **kwargs):
        if labels not in ("shifted", "hf"):
            raise ValueError(f'labels must be "shifted" or "hf", not '
                             f'{labels!r}')
        if seq_len is not None and (isinstance(seq_len, bool) or
                                    not isinstance(seq_len, int) or
                                    not 1 <= seq_len < 2 ** 32):
            raise ValueError(f"seq_len must be a whole number of tokens "
                             f"from 1, or None for the dataset's; not "
                             f"{seq_len!r}")
        if seq_len is not None and kwargs.get("early_preload"):
            raise ValueError("seq_len with early_preload: give one or the "
                             "other")
        super().__init__(options, dataset, batch_size, **kwargs)
        if seq_len is not None:
            self._opts["seq_len"] = seq_len
        self._labels = labels

    def _check_tokens(self):
        info = self.info
        shape = tuple(info["sample_shape"])
        if len(shape) != 2 or shape[0] != 3 or info["dtype"] != "int32":
            raise ValueError(
                f"dataset {self._dataset!r} is not a tokens dataset: its "
                f"samples are {info['dtype']} {list(shape)}, where a "
                f"tokens dataset's are int32 [3, seq_len] (type = tokens "
                f"in infeedd's catalogue)")
        return shape[1]

    @property
    def seq_len(self):
        """Tokens a row."""
        return self._check_tokens()

    def __iter__(self):
        self._check_tokens()
        it = super().__iter__()
        return (dict(lm_batch(step.data, self._labels), epoch=step.epoch,
                     step=step.step) for step in it)

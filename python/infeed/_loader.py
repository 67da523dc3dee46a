# SPDX-License-Identifier: MIT
"""infeed.DataLoader: poptorch.DataLoader's interface over infeedd."""

import os
import warnings

from . import _infeed
from . import transforms
from ._options import from_any

__all__ = ["DataLoader", "Files", "datasets"]

# torch's and poptorch's DataLoader arguments that mean nothing here:
# refused when set to anything but their default, with the reason.
_REFUSED = {
    "sampler": "infeedd owns the sample order (seed and epoch); use "
               "shuffle= and options.randomSeed()",
    "batch_sampler": "infeedd assembles each step's batches itself",
    "collate_fn": "steps arrive already batched as [combined_batch, "
                  "*sample_shape]; transform the step after it arrives",
    "worker_init_fn": "there are no Python workers: infeedd's workers "
                      "read and transform the samples",
    "multiprocessing_context": "there are no Python workers",
    "generator": "the shuffle depends on the seed alone: use "
                 "options.randomSeed() or seed=",
    "rebatched_worker_size": "infeedd's workers fill steps in parts "
                             "already; there is nothing to rebatch",
}
# ... and those accepted with no effect, with the reason.
_IGNORED = {
    "persistent_workers": "infeedd's workers always persist",
    "pin_memory": "steps are in shared memory already; pinning would "
                  "copy every step (call .pin_memory() yourself for CUDA)",
    "pin_memory_device": "see pin_memory",
    "prefetch_factor": "infeedd prepares buffer_size steps ahead; use "
                       "buffer_size=",
    "mode": "infeedd always prepares steps ahead, as poptorch's Async "
            "modes do",
    "auto_distributed_partitioning": "each process always gets its own "
                                     "share (options.Distributed)",
}
_DEFAULTS = {"persistent_workers": (None, False), "pin_memory": (False,),
             "pin_memory_device": ("",), "prefetch_factor": (2, None),
             "mode": (), "auto_distributed_partitioning": (True,)}
_TRANSFORMS = ("to_float32", "scale", "mean", "std")
_ASYNC_KEYS = {"buffer_size", "early_preload", "load_indefinitely",
               "miss_sleep_time_in_ms", "sharing_strategy"}


def _error_setup():
    from ._errors import error_classes
    _infeed.set_error_classes(error_classes())


_error_setup()


class Files:
    """The trainer's own files as a dataset, passed to infeedd by descriptor.

    ``data`` is a ``.npy`` file (C order), or a raw file of samples with
    ``shape`` (one sample) and ``dtype``; ``labels``, if any, a ``.npy`` file
    or a raw file of ``label_dtype`` (``"int32"`` or ``"int64"``) with one
    label per sample.  The DataLoader opens the files in the trainer's
    process, so the operating system checks the trainer's own permissions,
    and sends the open descriptors: infeedd never opens a path for a client.
    """

    def __init__(self, data, labels=None, *, shape=None, dtype=None,
                 label_dtype=None):
        self.data, self.labels = os.fspath(data), labels
        if labels is not None:
            self.labels = os.fspath(labels)
        self.shape = shape
        self.dtype, self.label_dtype = _dtype_name(dtype), \
            _dtype_name(label_dtype)
        if not _is_npy(self.data) and (shape is None or dtype is None):
            raise ValueError(
                f"{self.data} is not a .npy file: give shape= (one sample, "
                f"e.g. (1, 28, 28)) and dtype= ('uint8', 'float32', ...)")
        if (self.labels is not None and not _is_npy(self.labels)
                and label_dtype is None):
            raise ValueError(f"{self.labels} is not a .npy file: give "
                             f"label_dtype= ('int32' or 'int64')")

    def __repr__(self):
        return f"infeed.Files(data={self.data!r}, labels={self.labels!r})"


def _dtype_name(dtype):
    """"float32" for "float32", numpy.float32 or numpy.dtype("float32")."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    return _numpy().dtype(dtype).name


def _is_npy(path):
    return str(path).endswith(".npy")


def datasets(socket=None):
    """The datasets in infeedd's catalogue: a list of dicts with name,
    type, samples, shape, dtype, label_dtype and classes."""
    return _infeed.Client(socket, "infeed.datasets").datasets()


def _numpy():
    try:
        import numpy
    except ImportError:
        raise ImportError("infeed.DataLoader needs numpy: install Debian's "
                          "python3-numpy") from None
    return numpy


class DataLoader:
    """Device steps from infeedd, in place of ``poptorch.DataLoader``.

    ``infeed.DataLoader(options, dataset, batch_size=16, shuffle=True)``
    gives the same steps as ``poptorch.DataLoader(options, dataset, ...)``
    would for a dataset of the same samples: each item is one device step
    of ``batch_size × device_iterations × replication_factor ×
    gradient_accumulation`` samples (``combinedBatchSize``), and unpacks as
    ``data, labels`` (``data`` is ``[combinedBatchSize, *sample_shape]``,
    ``labels`` int64 ``[combinedBatchSize]``); it also has ``.indices``
    (each row's index in the dataset), ``.epoch`` and ``.step``.

    Args:
        options: an ``infeed.Options`` or a ``poptorch.Options`` (read by
            its attribute names; poptorch is not imported), or None.
        dataset: the name of a dataset in infeedd's catalogue (see
            ``infeed.datasets()``), or ``infeed.Files(...)``.
        batch_size: samples per micro-batch.
        shuffle: a new order every epoch, from the seed and the epoch alone
            (``options.randomSeed()`` or ``seed=``; default seed 0).
        drop_last: drop the samples that do not fill a last step (True, as
            poptorch); with False the last step is shorter.
        num_workers: at most this many of infeedd's workers at once for
            this loader; 0 (default) lets it use the whole pool.
        buffer_size: steps prepared ahead (ring slots), as poptorch's
            ``async_options={"buffer_size": n}``.
        early_preload: start filling every slot as soon as the loader is
            created, not at the first step.
        output: ``"torch"`` (tensors) or ``"numpy"`` (arrays).
        socket: infeedd's socket; default ``$INFEED_SOCKET`` or
            ``/run/infeed/infeedd.sock``.
        client_name: shown in infeedd's logs and ``infeedctl status``.
        timeout: seconds to wait for a step before raising
            ``infeed.StepTimeoutError``; 0 waits for ever (torch's name).
        seed: the shuffle's seed when ``options`` sets none.
        writable: deliver steps in copy-on-write memory (default True): an
            in-place write such as ``data.sub_(mean)`` changes only that
            step's copy; False maps them read-only (numpy arrays are then
            not writeable, and an in-place torch op would crash).
        reconnect_timeout: seconds to keep trying when infeedd restarts
            mid-session (the order is unchanged); 0 raises at once.
        async_options: poptorch's dict; its ``buffer_size`` and
            ``early_preload`` are used.
        share: join the other trainers of this user that read the same
            steps (same dataset, transform, seed, shuffle, batch sizes,
            drop_last, distributed share, buffer_size): infeedd reads
            and decodes each step once for all of them.  Each still gets
            every sample of its epochs once, in its own order; one that
            holds the others back for half a second in all within 2.5 s
            (stopped, or slower) goes on alone until it catches up, so
            none runs below 0.8 of its own pace for another (one with no
            room in infeedd's memory_budget for steps of its own is
            ended: its next() raises saying so).  True by default;
            False: steps of its own.
        transform: for an image dataset (``type = imagefolder`` or
            ``tar``), what infeedd's workers do to each image: a
            ``torchvision.transforms.Compose`` or one built from
            ``infeed.transforms`` (RandomResizedCrop, Resize, CenterCrop,
            RandomHorizontalFlip, ToTensor, PILToTensor, Normalize), as a
            torchvision ``ImageFolder`` would take it.  Anything else is
            refused by name.
        to_float32, scale, mean, std: infeedd's transform of an array
            dataset, run by its workers: uint8 samples become float32
            ``x * scale``, then ``(x - mean[c]) / std[c]`` per channel
            ``c``.

    Tensors view infeedd's memory: nothing is copied.  A step's memory goes
    back to infeedd when the last tensor or array made from it is gone, so
    a tensor kept by the program never changes, after ``close()`` too and
    in a shared group (the group does not refill its slot).
    ``len(loader)`` is the
    number of steps per epoch (per process when distributed); for an epoch
    resumed under another process count (``load_state_dict``), the steps
    that this process count delivers of it (``info["start_epoch_steps"]``).
    """

    def __init__(self, options, dataset, batch_size=1, shuffle=False,
                 drop_last=True, num_workers=0, buffer_size=3,
                 early_preload=False, output="torch", socket=None,
                 client_name=None, *, timeout=0, seed=None, writable=True,
                 reconnect_timeout=60.0, async_options=None, transform=None,
                 share=True, **kwargs):
        self._np = _numpy()
        if output not in ("torch", "numpy"):
            raise ValueError(f'output must be "torch" or "numpy", not '
                             f"{output!r}")
        if output == "torch":
            try:
                import torch
            except ImportError:
                raise ImportError('output="torch" needs torch: install '
                                  'Debian\'s python3-torch, or pass '
                                  'output="numpy"') from None
            self._torch = torch
        if not isinstance(dataset, (str, Files)):
            raise TypeError(
                f"dataset must be the name of a dataset in infeedd's "
                f"catalogue (see infeed.datasets() or `infeedctl datasets`)"
                f" or infeed.Files(...), not {type(dataset).__name__}: a "
                f"Python Dataset object cannot be sent to infeedd")
        if batch_size is None:
            raise ValueError("batch_size=None is not supported: infeed "
                             "always delivers batched steps")
        self._options = options
        self._dataset = dataset
        self._output = output
        self._socket = socket
        self._client_name = client_name or "python"
        self._timeout = float(timeout)
        opts = from_any(options)
        if seed is not None and "seed" not in opts:
            opts["seed"] = seed
        buffer_size, early_preload = self._async(async_options, buffer_size,
                                                 early_preload)
        opts.update(batch_size=batch_size, shuffle=bool(shuffle),
                    drop_last=bool(drop_last), num_workers=num_workers,
                    buffer_size=buffer_size,
                    early_preload=bool(early_preload),
                    load_indefinitely=False,
                    label_dtype=_infeed.DTYPE_INT64,
                    copy_on_write=bool(writable),
                    share=bool(share),
                    reconnect_timeout_ms=int(reconnect_timeout * 1000))
        opts.update(self._kwargs(kwargs))
        if transform is not None:
            opts["transform"] = transforms.pipeline(transform)
        self._opts = opts
        self._client = None
        self._info = None
        # Where the session is, is libinfeed's (Client.state()); here only
        # what the program asked for.
        self._next_epoch = 0     # what the next iter() starts
        self._resume = None      # (epoch, step, stages), load_state_dict's
        self._running = False    # an epoch is being iterated
        self._epoch = 0          # the epoch being (or last) iterated
        # Elastic resume: (epoch, its finished stages) that the session
        # attached with; the stages belong to that epoch only.
        self._stages = None
        if early_preload:
            self._session(0, 0)

    @staticmethod
    def _async(async_options, buffer_size, early_preload):
        """poptorch's async_options dict: buffer_size, early_preload."""
        if async_options is None:
            return buffer_size, early_preload
        unknown = set(async_options) - _ASYNC_KEYS
        if unknown:
            raise ValueError(
                f"async_options {sorted(unknown)} not supported: infeed "
                f"takes buffer_size and early_preload")
        for key in sorted(set(async_options) - {"buffer_size",
                                                 "early_preload"}):
            warnings.warn(f"infeed.DataLoader: async_options['{key}'] is "
                          f"ignored: infeedd prepares the steps",
                          stacklevel=4)
        return (async_options.get("buffer_size", buffer_size),
                async_options.get("early_preload", early_preload))

    @staticmethod
    def _kwargs(kwargs):
        """Transforms, and torch's arguments refused or ignored by name."""
        out = {}
        for key, value in kwargs.items():
            if key in _TRANSFORMS:
                out[key] = value
            elif key in _REFUSED:
                if value is not None:
                    raise ValueError(f"infeed.DataLoader does not take "
                                     f"{key}: {_REFUSED[key]}")
            elif key in _IGNORED:
                if value not in _DEFAULTS[key]:
                    warnings.warn(f"infeed.DataLoader ignores {key}="
                                  f"{value!r}: {_IGNORED[key]}",
                                  stacklevel=3)
            else:
                raise TypeError(f"infeed.DataLoader got an unexpected "
                                f"argument '{key}'")
        return out

    # The session

    def _connect(self):
        if self._client is None:
            self._client = _infeed.Client(self._socket, self._client_name)
            if self._output == "torch":
                # Steps built in C, as DLPack tensors: no numpy on the way.
                # torch's own converter of a capsule when it has one (what
                # the public from_dlpack calls after a Python-level check);
                # tensors are made ahead only outside inference mode.
                self._client.set_from_dlpack(
                    getattr(self._torch._C, "_from_dlpack",
                            self._torch.utils.dlpack.from_dlpack),
                    getattr(self._torch, "is_inference_mode_enabled",
                            None))
        return self._client

    def _at(self, epoch, step):
        """Whether the session gives (epoch, step) next."""
        if self._info is None:
            return False
        st = self._client.state()
        return (st["attached"] and not st["end_of_data_owed"]
                and (st["epoch"], st["step"]) == (epoch, step))

    def _stages_of(self, epoch):
        """The finished stages of @epoch the session attached with."""
        if self._stages is not None and self._stages[0] == epoch:
            return self._stages[1]
        return []

    def _session(self, epoch, step, stages=()):
        """A session whose next step is (epoch, step), after @epoch's
        finished @stages (elastic resume; none: an ordinary epoch)."""
        stages = [list(st) for st in stages]
        if self._at(epoch, step) and self._stages_of(epoch) == stages:
            return
        if self._info is not None:
            self._client.detach()
            self._info = None
        self._stages = None
        opts = dict(self._opts, start_epoch=epoch, start_step=step,
                    start_epoch_stages=stages)
        if isinstance(self._dataset, Files):
            self._info = self._attach_files(opts)
        else:
            self._info = self._connect().attach(self._dataset, opts)
        self._stages = (epoch, stages)
        self._shape = (self._info["sample_shape"])
        self._dtype = self._np.dtype(self._info["dtype"])
        self._label_dtype = self._np.dtype(self._info["label_dtype"])
        self._elems = 1
        for d in self._shape:
            self._elems *= d

    def _attach_files(self, opts):
        """Open the trainer's files here (the OS checks the trainer's own
        access) and attach to them by descriptor."""
        files = self._dataset
        fds = [-1, -1]
        try:
            fds[0] = os.open(files.data, os.O_RDONLY | os.O_CLOEXEC)
            if files.labels is not None:
                fds[1] = os.open(files.labels, os.O_RDONLY | os.O_CLOEXEC)
            spec = {"data_npy": _is_npy(files.data),
                    "shape": tuple(files.shape or ()),
                    "dtype": files.dtype,
                    "labels_npy": files.labels is not None
                    and _is_npy(files.labels),
                    "label_dtype": files.label_dtype}
            name = os.path.basename(files.data)[:64]
            return self._connect().attach_files(name, opts, tuple(fds),
                                                spec)
        finally:
            for fd in fds:
                if fd != -1:
                    os.close(fd)

    @property
    def info(self):
        """The session: sample_shape, dtype, label_dtype,
        combined_batch_size, steps_per_epoch, slots, ..."""
        if self._info is None:
            start = self._resume or (self._next_epoch, 0, [])
            self._session(*start)
        return dict(self._info)

    @property
    def combinedBatchSize(self):
        """Samples per device step (poptorch's name)."""
        return self.info["combined_batch_size"]

    @property
    def options(self):
        """The options given (poptorch's name)."""
        return self._options

    def __len__(self):
        """Steps per epoch, as poptorch's len(DataLoader); for an epoch
        resumed under another process count, its steps under this one."""
        info = self.info
        if self._running:
            epoch = self._epoch
        else:
            epoch = (self._resume or (self._next_epoch,))[0]
        if self._stages_of(epoch):
            return info["start_epoch_steps"]
        return info["steps_per_epoch"]

    # Iteration, epochs and state

    def __iter__(self):
        epoch, step, stages = self._resume or (self._next_epoch, 0, [])
        self._resume = None
        self._next_epoch = epoch + 1
        self._session(epoch, step, stages)
        self._running = True
        self._epoch = epoch
        # Its next() runs in C, without a Python frame (torch output);
        # it sets _running to False when the epoch ends.
        return self._client.epoch(self, epoch, self._timeout,
                                  None if self._output == "torch"
                                  else self._step)

    def _step(self, lease):
        """The numpy arrays of a step's lease."""
        np = self._np
        rows = lease.rows
        # The step's bytes as a uint8 array whose base is the lease (its
        # __array_interface__); every array made over it keeps it, and so
        # the lease, alive for as long as it (or a view of it) lives.
        buf = np.asarray(lease)
        data = np.ndarray((rows,) + self._shape, self._dtype, buf,
                          lease.data_offset)
        labels = np.ndarray((rows,), self._label_dtype, buf,
                            lease.labels_offset)
        # A copy (8 bytes a row): keeping a step's indices, as trainers do
        # for bookkeeping, must not hold its slot.
        indices = np.frombuffer(buf, np.uint64, rows,
                                lease.indices_offset).copy()
        return _infeed.Step((data, labels, indices, lease.epoch, lease.step))

    def set_epoch(self, epoch):
        """The next iteration runs epoch ``epoch`` from its first step
        (DistributedSampler's name; a state loaded after it wins)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or \
                epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
        self._next_epoch = epoch

    def _fingerprint(self):
        """What must be the same for a state to resume here."""
        o = self._opts
        name = self._dataset if isinstance(self._dataset, str) else \
            repr(self._dataset)
        return {"dataset": name, "shuffle": o["shuffle"],
                "seed": o.get("seed", 0), "drop_last": o["drop_last"],
                "transform": o.get("transform")}

    def state_dict(self):
        """Where the whole job is (torchdata's name), the same in every
        process: ``epoch``; ``stages``, the epoch's finished stages under
        other process counts, each ``[process_count, combined_batch_size,
        steps_done]``; the current stage's ``process_count``,
        ``combined_batch_size`` and ``step`` (its steps completed, so the
        next step the program would get); and the ``fingerprint`` of the
        dataset, seed, shuffle, drop_last and transform.  Plain values
        only: it serialises to JSON."""
        if self._running:
            st = self._client.state()
            epoch, step = st["epoch"], st["step"]
            stages = self._stages_of(epoch)
        elif self._resume is not None:
            epoch, step, stages = self._resume
        else:
            epoch, step, stages = self._next_epoch, 0, []
        return {"epoch": epoch, "stages": [list(st) for st in stages],
                "process_count": self._opts["distributed_process_count"],
                "combined_batch_size": self.info["combined_batch_size"],
                "step": step, "fingerprint": self._fingerprint()}

    @staticmethod
    def _parse_state(state):
        """(epoch, stages, process_count, combined_batch_size, step,
        fingerprint) of a state, this version's or an older one's (whose
        fingerprint held the process and the combined batch)."""
        try:
            epoch, step = int(state["epoch"]), int(state["step"])
            saved = dict(state["fingerprint"])
            if "process_count" in state:
                count = int(state["process_count"])
                cbs = int(state["combined_batch_size"])
                stages = [[int(p), int(c), int(k)]
                          for p, c, k in state["stages"]]
            else:
                count = int(saved["process"][1])
                cbs = int(saved["combined_batch_size"])
                stages = []
            if not {"dataset", "shuffle", "seed", "drop_last"} <= \
                    saved.keys():
                raise KeyError("fingerprint")
        except (KeyError, TypeError, ValueError, IndexError):
            raise ValueError(
                "not an infeed.DataLoader state: expected a dict with "
                "epoch, stages, process_count, combined_batch_size, step "
                "and fingerprint (as state_dict() gives)") from None
        if min([epoch, step, count - 1, cbs - 1] +
               [min(st[0] - 1, st[1] - 1, st[2]) for st in stages]) < 0:
            raise ValueError(f"this state has a negative or zero count: "
                             f"epoch {epoch}, step {step}, process_count "
                             f"{count}, combined_batch_size {cbs}, stages "
                             f"{stages}")
        return epoch, stages, count, cbs, step, saved

    def load_state_dict(self, state):
        """The next iteration resumes where ``state`` says the job was.
        With the process count and combined batch it was saved with, the
        same remaining steps in the same order; with others (elastic
        resume), the samples of the epoch no process was given yet, split
        among this job's processes by docs/protocol.md's rule.  A state of
        another dataset, seed, shuffle, drop_last or transform is refused,
        naming what differs."""
        epoch, stages, count, cbs, step, saved = self._parse_state(state)
        mine = self._fingerprint()
        # An older state did not record the transform.
        diff = [k for k in mine if k in saved and saved[k] != mine[k]]
        if diff:
            raise ValueError(
                "this state was saved by a loader with other "
                + ", ".join(f"{k} ({saved.get(k)!r}, here {mine[k]!r})"
                            for k in diff))
        here = (self._opts["distributed_process_count"],
                self.info["combined_batch_size"])
        if (count, cbs) != here and step > 0:
            # The saved stage is finished: this job starts a new one.
            stages = stages + [[count, cbs, step]]
            step = 0
        if len(stages) > _infeed.MAX_ELASTIC_STAGES:
            raise ValueError(
                f"this state's epoch changed process counts "
                f"{len(stages)} times; at most "
                f"{_infeed.MAX_ELASTIC_STAGES}: finish the epoch with the "
                f"process count of its last stage ({stages[-1][0]})")
        if not stages and step >= self.info["steps_per_epoch"]:
            raise ValueError(f"step {step} is outside an epoch of "
                             f"{self.info['steps_per_epoch']} steps")
        if stages:
            # Attach now: the daemon checks the stages (a refusal is
            # raised here), and len() counts this process count's steps.
            self._session(epoch, step, stages)
        self._resume = (epoch, step, stages)
        self._running = False

    def close(self):
        """End the session.  Steps still referenced stay readable and
        never change, shared or not: infeedd refills no slot they view."""
        if self._client is not None:
            self._client.detach()
        self._info = None
        self._running = False

    terminate = close    # poptorch's name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"infeed.DataLoader({self._dataset!r}, batch_size="
                f"{self._opts['batch_size']}, shuffle="
                f"{self._opts['shuffle']})")

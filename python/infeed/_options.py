# SPDX-License-Identifier: MIT
"""infeed.Options: PopTorch's loader-relevant options, with its names.

An ``infeed.Options`` reads and writes like a ``poptorch.Options``: the same
setters (each returns the options, so calls chain) and the same attributes.
``infeed.DataLoader`` also accepts a real ``poptorch.Options``, read through
those attribute names only (poptorch is never imported).
"""

import os

__all__ = ["Options", "from_any"]


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, not {value!r}")
    return value


class _Training:
    """``Options.Training``: gradient accumulation."""

    def __init__(self):
        self.gradient_accumulation = 1

    def gradientAccumulation(self, gradient_accumulation):
        """Micro-batches per replica per device iteration (default 1)."""
        self.gradient_accumulation = _positive(
            "gradientAccumulation", gradient_accumulation)
        return self


def _env_process():
    """(id, count) from mpirun/poprun's or torchrun's variables, or None.

    OMPI_COMM_WORLD_RANK/_SIZE (mpirun, poprun; what poptorch.Options reads)
    win over RANK/WORLD_SIZE (torchrun) when both are set.
    """
    for rank, size in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("RANK", "WORLD_SIZE")):
        r, s = os.environ.get(rank), os.environ.get(size)
        if r is None or s is None:
            continue
        try:
            r, s = int(r), int(s)
        except ValueError:
            raise ValueError(
                f"{rank}={os.environ[rank]!r} and {size}="
                f"{os.environ[size]!r} must be integers") from None
        if not 0 <= r < s:
            raise ValueError(f"{rank}={r} must be below {size}={s}")
        return r, s
    return None


class _Distributed:
    """``Options.Distributed``: this process's share of the data."""

    def __init__(self):
        self._set = False
        self.processId, self.numProcesses = _env_process() or (0, 1)

    def configureProcessId(self, process_id, num_processes):
        """This process is ``process_id`` of ``num_processes``."""
        _positive("num_processes", num_processes)
        if (isinstance(process_id, bool) or not isinstance(process_id, int)
                or not 0 <= process_id < num_processes):
            raise ValueError(f"process_id must be an int from 0 to "
                             f"{num_processes - 1}, not {process_id!r}")
        self.processId, self.numProcesses = process_id, num_processes
        self._set = True
        return self

    def disable(self):
        """One process: the whole dataset."""
        return self.configureProcessId(0, 1)


class Options:
    """The options of a device step, named as in ``poptorch.Options``.

    One step holds ``batch_size × device_iterations × replication_factor ×
    Training.gradient_accumulation`` samples (PopTorch's combined batch).
    The distributed process id and count come from ``configureProcessId``
    when called, else from ``OMPI_COMM_WORLD_RANK``/``_SIZE`` (mpirun,
    poprun), else from ``RANK``/``WORLD_SIZE`` (torchrun), else (0, 1).
    """

    def __init__(self):
        self.device_iterations = 1
        self.replication_factor = 1
        self.Training = _Training()
        self.Distributed = _Distributed()

    def deviceIterations(self, device_iterations):
        """Loops of the model per call to the device (default 1)."""
        self.device_iterations = _positive(
            "deviceIterations", device_iterations)
        return self

    def replicationFactor(self, replication_factor):
        """Replicas of the model, each taking its own micro-batches."""
        self.replication_factor = _positive(
            "replicationFactor", replication_factor)
        return self

    def randomSeed(self, random_seed):
        """The seed of the shuffle (as poptorch; torch's RNG untouched)."""
        if isinstance(random_seed, bool) or not isinstance(random_seed, int) \
                or random_seed < 0:
            raise ValueError(f"randomSeed takes an int >= 0, not "
                             f"{random_seed!r}")
        self.random_seed = random_seed
        return self

    def __repr__(self):
        return (f"infeed.Options(device_iterations={self.device_iterations}"
                f", replication_factor={self.replication_factor}, "
                f"gradient_accumulation="
                f"{self.Training.gradient_accumulation}, process "
                f"{self.Distributed.processId} of "
                f"{self.Distributed.numProcesses}, random_seed="
                f"{getattr(self, 'random_seed', None)})")


def _read(obj, path, default):
    for name in path.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return default
    return obj


def from_any(options):
    """The loader fields of an infeed.Options or a poptorch.Options."""
    if options is None:
        options = Options()
    if not hasattr(options, "device_iterations"):
        raise TypeError(
            f"options must be an infeed.Options or a poptorch.Options, not "
            f"{type(options).__name__}")
    group = _read(options, "input_group_size", 1)
    if group != 1:
        raise ValueError(
            f"inputReplicaGrouping with a group size of {group} is not "
            f"supported: infeed gives every replica its own micro-batches")
    pid = _read(options, "Distributed.processId", 0)
    count = _read(options, "Distributed.numProcesses", 1)
    explicit = _read(options, "Distributed._set", False)
    if not explicit and count == 1 and isinstance(options, Options) is False:
        # A poptorch.Options left at its default: torchrun's variables.
        pid, count = _env_process() or (pid, count)
    fields = {
        "device_iterations": _read(options, "device_iterations", 1),
        "replication_factor": _read(options, "replication_factor", 1),
        "gradient_accumulation":
            _read(options, "Training.gradient_accumulation", 1),
        "distributed_process_id": pid,
        "distributed_process_count": count,
    }
    seed = getattr(options, "random_seed", None)
    if seed is not None:
        fields["seed"] = seed
    return fields

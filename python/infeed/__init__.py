# SPDX-License-Identifier: MIT
"""infeed: device steps for PyTorch and PopTorch trainers from infeedd.

Change one line of a PopTorch trainer::

    loader = poptorch.DataLoader(opts, dataset, batch_size=16, shuffle=True)
    loader = infeed.DataLoader(opts, "fashion-mnist-train", batch_size=16,
                               shuffle=True)

and take the same device steps from the shared infeedd daemon, prepared
ahead by its workers and handed over without a copy.  See
``help(infeed.DataLoader)`` and /usr/share/doc/infeed/python.md.
"""

from ._errors import (ConnectionClosedError, DataError, Error,
                      InvalidArgumentError, NotFoundError,
                      PermissionDeniedError, ProtocolError,
                      ResourceExhaustedError, SlotsHeldError,
                      StepTimeoutError)
from ._infeed import Step
from ._loader import DataLoader, Files, datasets
from ._options import Options
from ._tokens import TokenLoader, lm_batch, write_tokens, write_tokens_text
from . import transforms

__all__ = [
    "DataLoader", "Options", "Files", "Step", "datasets", "Error",
    "NotFoundError", "PermissionDeniedError", "InvalidArgumentError",
    "ResourceExhaustedError", "DataError", "ProtocolError",
    "ConnectionClosedError", "StepTimeoutError", "SlotsHeldError",
    "transforms", "TokenLoader", "lm_batch", "write_tokens",
    "write_tokens_text",
]

# The public names say infeed.X in help(), reprs and tracebacks.
for _name in __all__:
    if _name not in ("Step", "transforms"):
        globals()[_name].__module__ = __name__
del _name

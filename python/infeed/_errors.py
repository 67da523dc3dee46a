# SPDX-License-Identifier: MIT
"""infeed's exceptions: one class per kind of failure, with the message.

Every class derives from ``infeed.Error`` (a ``RuntimeError``) and, where
Python has one, the built-in class a user would catch (``LookupError``,
``PermissionError``, ``ValueError``, ``ConnectionError``, ``TimeoutError``).
``.code`` is the daemon's error code name (``"ERROR_NOT_FOUND"``) when the
daemon refused, else None.
"""

__all__ = [
    "Error", "NotFoundError", "PermissionDeniedError",
    "InvalidArgumentError", "ResourceExhaustedError", "DataError",
    "ProtocolError", "ConnectionClosedError", "StepTimeoutError",
    "SlotsHeldError", "error_classes",
]


class Error(RuntimeError):
    """Something infeed or infeedd refused or could not do."""
    code = None


class NotFoundError(Error, LookupError):
    """No such dataset (``infeed.datasets()`` lists them), or the daemon
    ended the session because an operator's reload changed its dataset."""
    code = "ERROR_NOT_FOUND"


class PermissionDeniedError(Error, PermissionError):
    """The daemon's configuration does not let this user attach to the
    dataset (``allow_groups`` in infeed.conf)."""
    code = "ERROR_PERMISSION_DENIED"


class InvalidArgumentError(Error, ValueError):
    """A loader option out of range; the message says which."""
    code = "ERROR_INVALID_ARGUMENT"


class ResourceExhaustedError(Error):
    """The daemon's memory budget, client or session limit is full."""
    code = "ERROR_RESOURCE_EXHAUSTED"


class DataError(Error):
    """A sample could not be read; the message names the dataset, the
    sample's index and its files.  The session cannot go on."""
    code = "ERROR_DATA"


class ProtocolError(Error):
    """The daemon and this client disagree about the protocol (a bug, or
    a daemon of another version)."""


class ConnectionClosedError(Error, ConnectionError):
    """infeedd cannot be reached, or went away and did not come back
    within the reconnect time."""


class StepTimeoutError(Error, TimeoutError):
    """No step came within the DataLoader's ``timeout``."""


class SlotsHeldError(Error):
    """Every slot of the ring is held by a step the program still
    references, so the next step could never come."""


def error_classes():
    """The class for each key the C binding raises under."""
    classes = {
        "error": Error, "closed": ConnectionClosedError,
        "system": ConnectionClosedError, "protocol": ProtocolError,
        "usage": Error, "timeout": StepTimeoutError,
        "slots": SlotsHeldError,
    }
    daemon = {1: ProtocolError, 2: ProtocolError, 3: ProtocolError,
              4: InvalidArgumentError, 5: NotFoundError,
              6: ResourceExhaustedError, 7: PermissionDeniedError,
              8: DataError, 9: Error}
    for code, cls in daemon.items():
        classes[f"daemon:{code}"] = cls
    return classes

"""The export guard: an adapter's exports return error values, never trap.

An exception the adapter did not mean (a bug, a surprise in an answer) is
returned as `unavailable`: the service reads it as an unknown outcome, as it
reads a trap, and the instance stays usable.
"""

import functools

from wit_world.imports import log

from .types import AdapterError_Unavailable, Err, fail


def guarded(method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Err:
            raise
        except Exception as e:  # noqa: BLE001 — anything else is our bug
            log.log(log.Level.ERROR, f"{method.__name__} failed: {e!r}")
            raise fail(AdapterError_Unavailable(f"the adapter failed in {method.__name__}: {e!r}"))
    return call

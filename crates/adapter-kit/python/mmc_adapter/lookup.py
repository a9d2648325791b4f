"""An operation found by our id, as in the Rust kit (`mmc_adapter_kit::lookup`)."""

from typing import Callable, List, Optional, TypeVar

from .types import PspStatus, PspStatus_NotFound

T = TypeVar("T")


def pick(found: List[T], prefer: Callable[[T], bool]) -> Optional[T]:
    """The first of `found` that `prefer` keeps (a success, when one of two
    operations under our id succeeded), else the last one, else None."""
    return next((t for t in found if prefer(t)), found[-1] if found else None)


def status_of(found: Optional[T], status: Callable[[T], PspStatus]) -> PspStatus:
    """The status of what was found; nothing under our id is `not-found` (the
    service decides when that is final: a request may still be in flight)."""
    return PspStatus_NotFound() if found is None else status(found)

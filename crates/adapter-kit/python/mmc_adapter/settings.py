"""An adapter's settings and secrets, from the host's `config` capability.

One component can serve several markets of a provider: `<key>.<slug>` (that
market) wins over `<key>` (every market). A blank setting or an empty secret
counts as absent; a blank per-market value is absent for that market, not a
fall-back to the shared one.
"""

from typing import Callable, Optional

from wit_world.imports import config

from .types import AdapterError_NotSent, fail


def _lookup(get: Callable[[str], Optional[str]], slug: Optional[str], key: str,
            blank: Callable[[str], bool]) -> Optional[str]:
    value = get(f"{key}.{slug}") if slug else None
    if value is None:
        value = get(key)
    if value is None or blank(value):
        return None
    return value


def setting(key: str, slug: Optional[str] = None) -> Optional[str]:
    return _lookup(config.get, slug, key, lambda v: not v.strip())


def secret(key: str, slug: Optional[str] = None) -> Optional[str]:
    return _lookup(config.secret, slug, key, lambda v: v == "")


def required_secret(key: str, slug: Optional[str] = None) -> str:
    """A secret an operation cannot go without: absent, nothing is sent."""
    value = secret(key, slug)
    if value is None:
        raise fail(AdapterError_NotSent(f"secret {key} not configured"))
    return value


def required_setting(key: str, slug: Optional[str] = None) -> str:
    """A setting an operation cannot go without: absent, nothing is sent."""
    value = setting(key, slug)
    if value is None:
        raise fail(AdapterError_NotSent(f"{key} not configured"))
    return value.strip()


def number(key: str, default: int, slug: Optional[str] = None) -> int:
    """A setting read as a number; unreadable counts as absent."""
    value = setting(key, slug)
    try:
        return int(value.strip()) if value is not None else default
    except ValueError:
        return default

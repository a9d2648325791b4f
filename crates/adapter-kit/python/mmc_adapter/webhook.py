"""Inbound notifications: headers, and signatures compared in constant time."""

from typing import List, Optional, Tuple

from wit_world.imports import signing


def header(headers: List[Tuple[str, str]], name: str) -> Optional[str]:
    wanted = name.lower()
    return next((v for k, v in headers if k.lower() == wanted), None)


def hmac_sha256_hex(key: str, message: bytes) -> str:
    """HMAC-SHA256 by the host's signing capability, in lower-case hex."""
    return bytes(signing.hmac_sha256(key.encode("utf-8"), message)).hex()


def constant_time_eq(a: bytes, b: bytes) -> bool:
    """Equal, in a time that does not depend on where they differ."""
    if len(a) != len(b):
        return False
    diff = 0
    for x, y in zip(a, b):
        diff |= x ^ y
    return diff == 0

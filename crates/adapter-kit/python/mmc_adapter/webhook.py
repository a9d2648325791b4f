"""Inbound notifications: headers, signatures compared in constant time, and
HMAC-signed notifications checked against a time window, as in the Rust kit
(`mmc_adapter_kit::webhook`): `<header>: t=<unix seconds>,<key>=<hex>`
(several signatures while a secret is rotated), the signature over the
timestamp, a separator and the raw body, and the timestamp within a window
of our clock (a replayed notification is refused). Nothing is read from a
notification before it passes.
"""

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from wit_world.imports import clock, signing

from . import settings
from .types import AdapterError_Rejected, AdapterError_Unauthenticated, Inbound, fail

# Without the `webhook_tolerance_seconds` setting.
DEFAULT_TOLERANCE_S = 300


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


def method(req: Inbound, allowed: Sequence[str], what: str) -> None:
    """A notification by a method the provider does not use is refused unread."""
    if req.method.upper() not in allowed:
        raise fail(AdapterError_Rejected(f"{what} are {' or '.join(allowed)}, not {req.method}"))


@dataclass(frozen=True)
class Hmac:
    """How one provider signs its notifications."""

    # The header carrying the signature (`X-Signature`).
    header: str
    # The name of a signature in it (`v1`).
    signature_key: str
    # Between the timestamp and the body in the signed message (`""`, `"."`).
    separator: str

    def parse_header(self, value: str) -> Optional[Tuple[str, List[str]]]:
        """The timestamp text and the (lower-case) signatures of a header value."""
        timestamp, signatures = None, []
        for part in value.split(","):
            key, sep, text = part.strip().partition("=")
            if not sep:
                continue
            if key == "t":
                timestamp = text.strip()
            elif key == self.signature_key:
                signatures.append(text.strip().lower())
        if not timestamp or len(timestamp) > 12 or not timestamp.isdigit() or not signatures:
            return None
        return timestamp, signatures

    def verify(self, req: Inbound) -> None:
        """Checks `req` with the `webhook_secret` secret, the host's clock and
        the `webhook_tolerance_seconds` setting."""
        self.check(req.headers, bytes(req.body), settings.secret("webhook_secret"),
                   settings.number("webhook_tolerance_seconds", DEFAULT_TOLERANCE_S),
                   clock.now_ms() // 1000)

    def check(self, headers: List[Tuple[str, str]], body: bytes, secret: Optional[str],
              tolerance_s: int, now_s: int) -> None:
        """The check itself, over its inputs."""
        def refuse(message: str):
            return fail(AdapterError_Unauthenticated(message))

        if secret is None:
            # Never accept what we cannot check.
            raise refuse("webhook_secret not configured")
        value = header(headers, self.header)
        if value is None:
            raise refuse(f"no {self.header} header")
        parsed = self.parse_header(value)
        if parsed is None:
            raise refuse(f"malformed {self.header} header")
        timestamp, signatures = parsed
        if abs(now_s - int(timestamp)) > tolerance_s:
            raise refuse(f"{self.header} timestamp outside the tolerance (replayed or clock skew)")
        message = timestamp.encode("ascii") + self.separator.encode("utf-8") + body
        expected = hmac_sha256_hex(secret, message).encode("ascii")
        if not any(constant_time_eq(s.encode("utf-8"), expected) for s in signatures):
            raise refuse(f"{self.header} does not match")

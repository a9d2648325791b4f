"""The outbound exchange and the one rule that says what its ending means
for the money, as in the Rust kit (`mmc_adapter_kit::exchange`). Only an
explicit answer is known; a call that may have reached the operator without
an answer we can read leaves the outcome unknown (asked again by our id,
never sent again under a new one):

| ending                                         | class    | adapter-error      |
|------------------------------------------------|----------|--------------------|
| timeout                                        | unknown  | `timeout`          |
| connection failed or reset, backend failure    | unknown  | `unavailable`      |
| 5xx                                            | unknown  | `unavailable`      |
| 1xx, 3xx, a 2xx the call does not expect       | unknown  | `invalid-response` |
| an expected success whose body cannot be read  | unknown  | `invalid-response` |
| 401, 403, 404, 429: refused because of us      | refused  | `rejected`         |
| any other 4xx: the operator declined           | known    | (read by adapter)  |
| an expected success                            | known    | (read by adapter)  |
| the host's allow-list denied it                | not sent | `not-sent`         |

"Not sent" is said only when nothing can have left us: a connection that
failed is not proof that the request did not arrive.
"""

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional, Tuple

from wit_world.imports import outbound_http
from wit_world.imports.mmc_platform_types import CapabilityError_Denied, CapabilityError_Timeout

from .types import (
    AdapterError,
    Failure,
    AdapterError_InvalidResponse,
    AdapterError_NotSent,
    AdapterError_Rejected,
    AdapterError_Timeout,
    AdapterError_Unavailable,
    Err,
    fail,
)

Response = outbound_http.Response


def excerpt(body: bytes, limit: int = 200) -> str:
    """The start of an answer, printable, to quote in an error."""
    text = body[:limit].decode("utf-8", errors="replace")
    return "".join(c if c.isprintable() else "?" for c in text)


def ours(status: int) -> bool:
    """Refused because of us (credentials, path, pace): not performed."""
    return status in (401, 403, 404, 429)


@dataclass(frozen=True)
class Success:
    """A success status the call expects: its body is the operator's answer."""

    response: Response


@dataclass(frozen=True)
class Declined:
    """A 4xx other than ours: the operator declined (its body says why)."""

    response: Response


@dataclass(frozen=True)
class Provider:
    """How a provider is named in errors, and where it is reached."""

    name: str

    def send(self, method: str, url: str, headers: List[Tuple[str, str]],
             body: bytes, timeout_ms: int) -> Response:
        """One exchange; a failure to reach the operator, or a 5xx, becomes
        the adapter error that says what is known of the operation."""
        request = outbound_http.Request(
            method=method, url=url, headers=headers, body=body, timeout_ms=timeout_ms)
        try:
            resp = outbound_http.send(request)
        except Err as e:
            raise fail(self.transport_error(e.value, method, url))
        if resp.status >= 500:
            raise fail(AdapterError_Unavailable(
                f"{self.name} answered {resp.status} to {method} {url}: {excerpt(resp.body)}"))
        return resp

    def transport_error(self, error: Any, method: str, url: str) -> AdapterError:
        if isinstance(error, CapabilityError_Timeout):
            return AdapterError_Timeout(
                f"{self.name} did not answer {method} {url} in time: {error.value}")
        if isinstance(error, CapabilityError_Denied):
            return AdapterError_NotSent(f"outbound request denied: {error.value}")
        return AdapterError_Unavailable(f"{self.name} unreachable: {error.value}")

    def unexpected(self, resp: Response) -> AdapterError:
        """An answer the call did not expect: a 4xx is a refusal (nothing
        performed), anything else cannot be read (unknown)."""
        if 400 <= resp.status <= 499:
            return AdapterError_Rejected(
                f"{self.name} refused the request ({resp.status}): {excerpt(resp.body)}")
        return AdapterError_InvalidResponse(
            f"{self.name} answered {resp.status} unexpectedly: {excerpt(resp.body)}")

    def reply(self, resp: Response, success: Iterable[int]):
        """Classifies the answer to a call that expects one of `success`."""
        if resp.status in success:
            return Success(resp)
        if ours(resp.status):
            raise fail(self.unexpected(resp))
        if 400 <= resp.status <= 499:
            return Declined(resp)
        raise fail(self.unexpected(resp))

    def read(self, what: str, body: bytes, shape: Callable[[Any], Optional[Any]]):
        """A JSON body read by `shape` (which answers None for what it cannot
        read): unreadable, the answer is unknown."""
        try:
            parsed = shape(json.loads(body.decode("utf-8")))
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
            raise fail(AdapterError_InvalidResponse(f"unreadable {self.name} {what}: {e}"))
        if parsed is None:
            raise fail(AdapterError_InvalidResponse(
                f"unreadable {self.name} {what}: {excerpt(body)}"))
        return parsed


def coded_refusal(provider: str, status: int, body: bytes) -> Failure:
    """A 4xx answer as a refusal, with the `code` and `message` of a
    `{code, message}` error body when it has them."""
    code = message = None
    try:
        value = json.loads(body.decode("utf-8"))
        if isinstance(value, dict):
            code, message = value.get("code"), value.get("message")
    except (ValueError, UnicodeDecodeError):
        pass
    coded = f" {code}" if code is not None else ""
    said = f": {message}" if message is not None else "."
    return Failure(code="operator_refused",
                   message=f"{provider} refused the request ({status}{coded}){said}")


def before_sending(what: str, error: AdapterError) -> AdapterError:
    """A failure of a call made before the one that moves money (a lookup, a
    token): nothing was asked of the customer, whatever the error says."""
    if isinstance(error, (AdapterError_NotSent, AdapterError_Rejected)):
        return error
    return AdapterError_NotSent(f"{what}, nothing sent: {getattr(error, 'value', error)}")

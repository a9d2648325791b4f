"""Acme's wire formats and what each says, as adapter types. Only an
explicit `SUCCESSFUL` or `FAILED` is final; anything else is pending.

Each reader answers None for what it cannot read: the kit's
`Provider.read` then reports the answer as unreadable (unknown).
"""

import json
from dataclasses import dataclass
from typing import Any, List, Optional

from mmc_adapter.reasons import OUR_WORDS, Reasons
from mmc_adapter.types import (
    Failure,
    PspStatus,
    PspStatus_Completed,
    PspStatus_Failed,
    PspStatus_Pending,
    Settled,
)


def create_collection(*, reference: str, amount: int, currency: str, phone: str,
                      callback_url: str) -> bytes:
    """`POST /v1/collections`: a request to pay, created under our id."""
    return json.dumps({
        # Our payment id: Acme refuses a second collection under it.
        "reference": reference,
        # A string of digits, in major units.
        "amount": str(amount),
        "currency": currency,
        # The customer's number, digits only (`22901...`).
        "msisdn": "".join(c for c in phone if c.isdigit()),
        # Where Acme posts the collection once it is final.
        "callback_url": callback_url,
    }).encode("utf-8")


@dataclass(frozen=True)
class Collection:
    """A collection as Acme reports it (answers and callbacks' `data`)."""

    id: str
    reference: str
    # `PENDING`, `SUCCESSFUL`, `FAILED`.
    status: str
    # What was asked (and, successful, taken), as Acme states it.
    amount: str
    currency: str
    msisdn: Optional[str]
    # `FAILED` only: why (`PAYER_DECLINED`, `INSUFFICIENT_FUNDS`, `EXPIRED`).
    failure_reason: Optional[str]


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def collection(value: Any) -> Optional[Collection]:
    if not isinstance(value, dict):
        return None
    fields = [_text(value.get(k)) for k in ("id", "reference", "status", "amount", "currency")]
    if any(f is None for f in fields):
        return None
    return Collection(*fields, msisdn=_text(value.get("msisdn")),
                      failure_reason=_text(value.get("failure_reason")))


def collection_list(value: Any) -> Optional[List[Collection]]:
    """`GET /v1/collections?reference=`: `{data: [...]}`, the collections
    under one of our ids."""
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, list):
        return None
    found = [collection(c) for c in data]
    return None if any(c is None for c in found) else found


def event(value: Any) -> Optional[Collection]:
    """A callback: `{event, data}`, signed (`X-Signature`)."""
    if not isinstance(value, dict) or not isinstance(value.get("event"), str):
        return None
    return collection(value.get("data"))


def status(c: Collection) -> PspStatus:
    if c.status == "SUCCESSFUL":
        return PspStatus_Completed(Settled(amount=c.amount, currency=c.currency, party=c.msisdn))
    if c.status == "FAILED":
        return PspStatus_Failed(failure_for(c.failure_reason))
    return PspStatus_Pending()


# Acme's reasons in the service's failure codes, worded in ours (Acme gives
# no message); a reason not listed is `operator_error` with Acme's.
REASONS = Reasons("Acme", """
    declined_by_customer: PAYER_DECLINED
    insufficient_funds:   INSUFFICIENT_FUNDS
    approval_expired:     EXPIRED
""", OUR_WORDS)


def failure_for(reason: Optional[str]) -> Failure:
    return REASONS.failure(reason, None)

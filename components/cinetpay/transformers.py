"""CinetPay's wire formats (Payment API v2, https://docs.cinetpay.com) and
what each says, as adapter types.

- `POST /v2/payment` opens a payment link: `{code: "201", message:
  "CREATED", data: {payment_token, payment_url}}`. Moves no money: the
  customer pays on CinetPay's page.
- `POST /v2/payment/check` by our `transaction_id`: `{code, message, data:
  {amount, currency, status, payment_method, operator_id, payment_date…}}`.
  `ACCEPTED` is paid (for the amount and currency it states), `REFUSED`
  failed; anything else (`WAITING_FOR_CUSTOMER`, `PENDING`, anything new) is
  pending: only an explicit answer is final.
- The notification is a form POST (`cpm_site_id`, `cpm_trans_id`,
  `cpm_amount`, `cpm_currency`, …, `cpm_error_message`), signed by the
  `x-token` header: the HMAC-SHA256, in hex, of its fields concatenated in
  the documented order, with the merchant's Secret Key.

All three answer in CinetPay's coded envelope; its codes are strings
(`"00"`, `"201"`, `"600"`…).
"""

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional
from urllib.parse import parse_qs

from mmc_adapter.types import (
    Failure,
    PspStatus,
    PspStatus_Completed,
    PspStatus_Failed,
    PspStatus_Pending,
    Settled,
    failure,
)

CREATED = "201"
SUCCESS = "00"
# The notification's `cpm_error_message` for a paid transaction, as
# CinetPay's code table spells it.
PAID_MESSAGE = "SUCCES"

# CinetPay's codes that refuse the request itself because of our settings
# (credentials, site): nothing was performed, and it is not the customer's
# refusal either.
OUR_SETTINGS = {"609": "AUTH_NOT_FOUND", "613": "SITE_ID_NOTVALID", "606": "INCORRECT_SETTINGS"}

# Reasons of a refused payment, as CinetPay names them, in our words.
REASONS = {
    "PAYMENT_FAILED": "declined",
    "INSUFFICIENT_BALANCE": "insufficient_funds",
    "TRANSACTION_CANCEL": "cancelled",
    "OTP_CODE_ERROR": "declined",
}

# The characters CinetPay asks not to put in a description.
UNSAFE_IN_DESCRIPTION = "#/$_&"


def init_body(*, api_key: str, site_id: str, transaction_id: str, amount: int,
              currency: str, description: str, notify_url: str, return_url: str,
              channels: str, lang: str, metadata: str, phone: Optional[str]) -> bytes:
    """`POST /v2/payment`: a payment link for our `transaction_id`."""
    body: Dict[str, Any] = {
        "apikey": api_key,
        "site_id": site_id,
        "transaction_id": transaction_id,
        # An integer of whole units (XOF has no subunit), a multiple of 5.
        "amount": amount,
        "currency": currency,
        "description": "".join(c for c in description if c not in UNSAFE_IN_DESCRIPTION),
        "notify_url": notify_url,
        "return_url": return_url,
        "channels": channels,
        "lang": lang,
        "metadata": metadata,
    }
    if phone:
        # The page then takes payment from this number only.
        body["customer_phone_number"] = phone
        body["lock_phone_number"] = True
    return json.dumps(body).encode("utf-8")


def check_body(*, api_key: str, site_id: str, transaction_id: str) -> bytes:
    """`POST /v2/payment/check` by our `transaction_id`."""
    return json.dumps(
        {"apikey": api_key, "site_id": site_id, "transaction_id": transaction_id}
    ).encode("utf-8")


@dataclass(frozen=True)
class Coded:
    """CinetPay's envelope: a code, its message, the data (if any)."""

    code: str
    message: str
    description: str
    data: Optional[Dict[str, Any]]


def coded(value: Any) -> Optional[Coded]:
    """The envelope, or None when the answer is not one."""
    if not isinstance(value, dict) or value.get("code") is None:
        return None
    data = value.get("data")
    return Coded(
        code=str(value["code"]),
        message=str(value.get("message") or ""),
        description=str(value.get("description") or ""),
        data=data if isinstance(data, dict) else None,
    )


@dataclass(frozen=True)
class Link:
    token: str
    url: str


def payment_link(answer: Coded) -> Optional[Link]:
    """The link of a `201 CREATED` answer; None when it has none."""
    data = answer.data or {}
    token, url = data.get("payment_token"), data.get("payment_url")
    if answer.code != CREATED or not isinstance(token, str) or not isinstance(url, str):
        return None
    if not token or not url:
        return None
    return Link(token=token, url=url)


def refusal(answer: Coded) -> Failure:
    """A refused initialisation, in CinetPay's words."""
    detail = answer.description or answer.message
    return failure(
        "operator_refused",
        f"CinetPay refused the payment ({answer.code} {answer.message}): {detail}",
    )


def check_status(answer: Coded) -> Optional[PspStatus]:
    """What a check answer says of the payment; None when it says nothing
    readable (no status)."""
    data = answer.data
    if data is None or not isinstance(data.get("status"), str):
        return None
    status = data["status"].upper()
    if status == "ACCEPTED":
        if answer.code != SUCCESS:
            return None
        return settled(data.get("amount"), data.get("currency"), None)
    if status == "REFUSED":
        return refused(answer.message, answer.description)
    if status in ("CANCELED", "CANCELLED"):
        return PspStatus_Failed(failure(
            "cancelled", f"CinetPay says the payment was cancelled ({answer.message})."))
    return PspStatus_Pending()


def settled(amount: Any, currency: Any, party: Optional[str]) -> Optional[PspStatus]:
    """A success for what the answer says was moved; None when it does not
    say (a success is never filled in from the request)."""
    if isinstance(amount, (int, float)) and not isinstance(amount, bool):
        amount = str(amount)
    if not isinstance(amount, str) or not amount.strip():
        return None
    if not isinstance(currency, str) or not currency.strip():
        return None
    return PspStatus_Completed(Settled(amount=amount.strip(), currency=currency.strip(),
                                       party=party))


def refused(message: str, description: str) -> PspStatus:
    code = REASONS.get(message.upper(), "declined")
    return PspStatus_Failed(failure(
        code, f"CinetPay refused the payment ({message}): {description or message}"))


# The notification's fields in the order its `x-token` signs them.
SIGNED_FIELDS = (
    "cpm_site_id", "cpm_trans_id", "cpm_trans_date", "cpm_amount", "cpm_currency",
    "signature", "payment_method", "cel_phone_num", "cpm_phone_prefixe", "cpm_language",
    "cpm_version", "cpm_payment_config", "cpm_page_action", "cpm_custom",
    "cpm_designation", "cpm_error_message",
)


def notification(body: bytes) -> Optional[Dict[str, str]]:
    """The notification's form fields; None when it is not a form."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fields = parse_qs(text, keep_blank_values=True, strict_parsing=False)
    if "cpm_trans_id" not in fields:
        return None
    return {k: v[0] for k, v in fields.items()}


def signed_message(fields: Dict[str, str]) -> bytes:
    """What the `x-token` signs: the fields concatenated, absent ones empty."""
    return "".join(fields.get(k, "") for k in SIGNED_FIELDS).encode("utf-8")


def notification_status(fields: Dict[str, str]) -> Optional[PspStatus]:
    """A notification says paid (for the amount and currency it states) only
    in so many words; anything else is a hint to ask (CinetPay sends
    `WAITING_FOR_CUSTOMER` notifications before the customer approves)."""
    if fields.get("cpm_error_message", "").upper() != PAID_MESSAGE:
        return PspStatus_Pending()
    digits = "".join(c for c in fields.get("cpm_phone_prefixe", "") + fields.get(
        "cel_phone_num", "") if c.isdigit())
    return settled(fields.get("cpm_amount"), fields.get("cpm_currency"), digits or None)

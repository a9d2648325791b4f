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

CinetPay's transfer API (https://docs.cinetpay.com, "Transfer API"), for
payouts, on its own host, answers in an envelope of its own, `{code,
message, description, data}`, `0` for success:

- `POST /v1/auth/login` (form: `apikey`, `password`) gives a token that
  lives 5 minutes, passed as `?token=` to every other call.
- `POST /v1/transfer/contact` (form: `data`, a JSON list of `{prefix,
  phone, name, surname, email}`): money goes only to a contact; one that
  exists already is answered `726 ERROR_PHONE_ALREADY_MY_CONTACT`, a success.
- `POST /v1/transfer/money/send/contact` (form: `data`, a JSON list of
  `{prefix, phone, amount, client_transaction_id, notify_url}`): a transfer
  under our id; CinetPay refuses a `client_transaction_id` it has seen
  (`805 CLIENT_TRANSACTION_ID_EXIST`), so a retry never pays twice.
- `GET /v1/transfer/check/balance`: the transfer account, `{amount,
  inUsing, available}` (what transfers on their way hold, what is left).
- `GET /v1/transfer/check/money?client_transaction_id=`: the transfers
  under our id, `treatment_status` `VAL` (done) and `REJ` (rejected) final,
  `NEW`, `REC` and `NOS` on their way.
- The transfer notification, a form POST to the transfer's `notify_url`
  (`transaction_id`, `client_transaction_id`, `treatment_status`…), is not
  signed: CinetPay says to ask the transfer's real values by querying it.
"""

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional
from urllib.parse import parse_qs, urlencode

from mmc_adapter.reasons import Reasons
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

# Reasons of a refused payment, as CinetPay names them, in our codes; its
# description is kept. `PAYMENT_FAILED` does not say why, `OTP_CODE_ERROR`
# (the code the customer generated was wrong) has no code of ours: both, and
# anything new, are `operator_error` with CinetPay's words.
REASONS = Reasons("CinetPay", """
    insufficient_funds: INSUFFICIENT_BALANCE
    cancelled:          TRANSACTION_CANCEL
""")

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
    return PspStatus_Failed(REASONS.failure(message.upper(), description or None))


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
    """What a notification claims: paid (for the amount and currency it
    states) only in so many words, else pending (CinetPay sends
    `WAITING_FOR_CUSTOMER` notifications before the customer approves).
    Either way the service asks `status` before recording anything."""
    if fields.get("cpm_error_message", "").upper() != PAID_MESSAGE:
        return PspStatus_Pending()
    digits = "".join(c for c in fields.get("cpm_phone_prefixe", "") + fields.get(
        "cel_phone_num", "") if c.isdigit())
    return settled(fields.get("cpm_amount"), fields.get("cpm_currency"), digits or None)


# The transfer API's country prefixes of the markets served.
COUNTRY_PREFIX = {"CI": "225", "BJ": "229", "TG": "228"}

# Transfer API codes that refuse the request because of our settings
# (credentials, token, account): nothing was performed.
TRANSFER_OUR_SETTINGS = {
    "701": "INVALID_CREDENTIALS", "702": "COULD_NOT_CREATE_TOKEN", "703": "INVALID_USER",
    "705": "EXPIRED_TOKEN", "706": "INVALID_TOKEN", "707": "CANT_REFRESH_TOKEN",
    "708": "NOT_ALLOWED",
}

# Transfer API codes that refuse the transfer itself, as CinetPay's code
# table describes them: nothing was sent. Any other code (`-1
# OPERATION_ERROR`, `709`/`710 EXECUTION_ERROR`, `715 UNEXPECTED_ERROR`, a
# new one) says nothing certain: the outcome is unknown, asked by our id.
TRANSFER_REFUSED = {
    "602": "INSUFFICIENT_BALANCE", "704": "INVALID_PARAM", "716": "DATA_NOT_VALID",
    "717": "ERROR_PHONE_NOT_PARTICULAR", "718": "JSON_PARSE_ERROR",
    "719": "AMOUNT_TOO_SMALL", "720": "AMOUNT_TOO_LARGE", "721": "OPERATOR_NOT_AVAILABLE",
    "724": "ERROR_PHONE_NOT_MY_CONTACT", "725": "MISSING_NOTIFY_URL", "801": "INVALID_AMOUNT",
    "802": "INVALID_PHONE", "804": "OPERATOR_UNAVAILABLE",
}

TRANSFER_SUCCESS = "0"
CONTACT_EXISTS = "726"
TRANSFER_ID_EXISTS = "805"
TRANSFER_NOT_FOUND = "723"


def form(fields: Dict[str, str]) -> bytes:
    return urlencode(fields).encode("utf-8")


def login_body(*, api_key: str, password: str) -> bytes:
    """`POST /v1/auth/login`."""
    return form({"apikey": api_key, "password": password})


def contact_body(*, prefix: str, phone: str, name: str) -> bytes:
    """`POST /v1/transfer/contact`: the beneficiary as a contact."""
    first, _, rest = name.strip().partition(" ")
    contact = {"prefix": prefix, "phone": phone, "name": rest or first, "surname": first,
               "email": ""}
    return form({"data": json.dumps([contact])})


def transfer_body(*, prefix: str, phone: str, amount: int, client_transaction_id: str,
                  notify_url: str) -> bytes:
    """`POST /v1/transfer/money/send/contact`: one transfer under our id."""
    transfer = {"prefix": prefix, "phone": phone, "amount": amount,
                "client_transaction_id": client_transaction_id, "notify_url": notify_url}
    return form({"data": json.dumps([transfer])})


@dataclass(frozen=True)
class TransferAnswer:
    """The transfer API's envelope: its code (as text), message, and data."""

    code: str
    message: str
    description: str
    data: Any


def transfer_answer(value: Any) -> Optional[TransferAnswer]:
    if not isinstance(value, dict) or value.get("code") is None:
        return None
    return TransferAnswer(code=str(value["code"]).strip(),
                          message=str(value.get("message") or ""),
                          description=str(value.get("description") or ""),
                          data=value.get("data"))


def items(answer: TransferAnswer) -> List[Dict[str, Any]]:
    """The records of an answer's `data`: a list of them, or a list of lists
    (one per request item, as the contact answer nests them)."""
    found: List[Dict[str, Any]] = []
    data = answer.data if isinstance(answer.data, list) else [answer.data]
    for entry in data:
        for record in (entry if isinstance(entry, list) else [entry]):
            if isinstance(record, dict):
                found.append(record)
    return found


def item_code(record: Dict[str, Any]) -> str:
    code = record.get("code")
    return TRANSFER_SUCCESS if code is None else str(code).strip()


def token(answer: TransferAnswer) -> Optional[str]:
    data = answer.data if isinstance(answer.data, dict) else {}
    value = data.get("token")
    return value if isinstance(value, str) and value else None


def transfer_status(record: Dict[str, Any], currency: str) -> Optional[PspStatus]:
    """What a transfer record says; None when a done transfer does not say
    for how much. CinetPay's transfer answers state no currency: a transfer
    account holds the market's (XOF in every market served)."""
    status = str(record.get("treatment_status") or "").upper()
    if status == "VAL":
        receiver = "".join(c for c in str(record.get("receiver") or "") if c.isdigit())
        return settled(record.get("amount"), currency, receiver or None)
    if status == "REJ":
        comment = record.get("comment") or "no reason given"
        return PspStatus_Failed(failure(
            "operator_refused", f"CinetPay rejected the transfer: {comment}"))
    return PspStatus_Pending()


def transfer_refusal(code: str, message: str, description: str) -> Failure:
    return failure("operator_refused",
                   f"CinetPay refused the transfer ({code} {message}): {description or message}")


def transfer_notification(body: bytes) -> Optional[Dict[str, str]]:
    """A transfer notification's form fields; None when it is not one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fields = parse_qs(text, keep_blank_values=True, strict_parsing=False)
    if "client_transaction_id" not in fields or "cpm_trans_id" in fields:
        return None
    return {k: v[0] for k, v in fields.items()}


@dataclass(frozen=True)
class TransferBalance:
    """`GET /v1/transfer/check/balance`'s `data`, amounts as written:
    `available`, and what transfers on their way hold (`inUsing`)."""

    available: str
    in_using: Optional[str]


def _amount(value: Any) -> Optional[str]:
    """An amount CinetPay wrote as a number or as text; None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    text = str(value).strip()
    digits = text[1:] if text.startswith("-") else text
    whole, _, fraction = digits.partition(".")
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return None
    return text


def transfer_balance(answer: TransferAnswer) -> Optional[TransferBalance]:
    data = answer.data if isinstance(answer.data, dict) else {}
    available = _amount(data.get("available"))
    if available is None:
        return None
    return TransferBalance(available=available, in_using=_amount(data.get("inUsing")))

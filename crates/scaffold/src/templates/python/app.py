"""Live adapter for Acme (`moov-bj`), a collections API, written in Python
on the Python adapter kit (`crates/adapter-kit/python/mmc_adapter`) and
built into a component by componentize-py: a request to pay pushed to the
customer's phone, its status asked by our id, and a signed callback once it
is final.

- `initiate`: `POST /v1/collections` with our payment id as `reference`
  (Acme refuses a second collection under one reference, so a retry can
  never pay twice); `201` -> awaiting the customer.
- `status` (and `cancel`: Acme cannot withdraw a request to pay):
  `GET /v1/collections?reference=<our id>`; an empty list is `not-found`.
- `parse-callback`: `X-Signature: t=<unix seconds>,v1=<hex
  HMAC-SHA256(webhook_secret, "<t>.<raw body>")>` is checked (and the
  timestamp's age) before anything is read.

Settings: `base_url` (required), `timeout_ms`, `operators`,
`webhook_tolerance_seconds`. Secrets: `api_key` (a bearer token),
`webhook_secret`.
"""

from typing import List, Optional
from urllib.parse import quote

import transformers as wire
from mmc_adapter import exchange, lookup, spec
from mmc_adapter.entry import guarded
from mmc_adapter.exchange import Declined, Provider
from mmc_adapter.types import (
    AdapterError_NotSupported,
    AdapterError_Rejected,
    CallbackUpdate,
    Inbound,
    Initiated,
    Initiated_AwaitingCustomer,
    Initiated_Refused,
    InitiateRequest,
    OperationRef,
    OperatorInfo,
    OtpOutcome,
    PayoutRequest,
    PspStatus,
    RefundRequest,
    Started,
    SubjectKind,
    fail,
)
from mmc_adapter.webhook import Hmac, method

# The provider's books: none published here (no statement, no balance). A
# provider that states a balance subclasses `NoBooks` and overrides `balances`.
from mmc_adapter.books import NoBooks as Books  # noqa: E402,F401

SPEC = spec.Spec(
    provider="Acme",
    # The slugs of the operator table this provider is documented for.
    family=("moov-bj",),
    # How long the customer can still approve a request to pay.
    approval_window_ms=5 * 60 * 1000,
)

ACME = Provider(name="Acme")

SIGNATURE = Hmac(header="X-Signature", signature_key="v1", separator=".")


class Api:
    """Acme's API for a served operator: its base URL and our API key."""

    def __init__(self, operator: str):
        market = SPEC.market(operator)
        self.base_url = market.base_url()
        self.api_key = market.secret("api_key")
        self.timeout_ms = market.timeout_ms()

    def send(self, verb: str, path: str, body: bytes = b""):
        headers = [("Authorization", f"Bearer {self.api_key}")]
        if body:
            headers.append(("Content-Type", "application/json"))
        return ACME.send(verb, f"{self.base_url}{path}", headers, body, self.timeout_ms)


def collection(api: Api, payment: OperationRef) -> Optional[wire.Collection]:
    """The collection made under our id, if Acme has one (a successful one
    wins if there were ever two)."""
    path = f"/v1/collections?reference={quote(payment.id, safe='')}"
    resp = api.send("GET", path)
    if resp.status != 200:
        raise fail(ACME.unexpected(resp))
    found = ACME.read("collection list", resp.body, wire.collection_list)
    return lookup.pick(found, lambda c: c.status == "SUCCESSFUL")


class Operator:
    """The `mmc:adapter/operator` export."""

    @guarded
    def describe(self) -> List[OperatorInfo]:
        return SPEC.describe()

    @guarded
    def initiate(self, req: InitiateRequest) -> Initiated:
        api = Api(req.operator)
        if not req.phone:
            raise fail(AdapterError_Rejected("Acme needs the customer's phone number"))
        body = wire.create_collection(
            reference=req.payment_id, amount=req.amount, currency=req.currency,
            phone=req.phone, callback_url=req.callback_url)
        reply = ACME.reply(api.send("POST", "/v1/collections", body), (201,))
        if isinstance(reply, Declined):
            return Initiated_Refused(
                exchange.coded_refusal("Acme", reply.response.status, reply.response.body))
        created = ACME.read("collection", reply.response.body, wire.collection)
        return Initiated_AwaitingCustomer(created.id)

    @guarded
    def confirm_otp(self, payment: OperationRef, otp: str) -> OtpOutcome:
        raise fail(AdapterError_NotSupported("Acme takes no one-time code"))

    @guarded
    def status(self, payment: OperationRef) -> PspStatus:
        return lookup.status_of(collection(Api(payment.operator), payment), wire.status)

    @guarded
    def cancel(self, payment: OperationRef) -> PspStatus:
        # Acme cannot withdraw a request to pay: report where it stands.
        return self.status(payment)

    @guarded
    def refund(self, req: RefundRequest) -> Started:
        raise fail(AdapterError_NotSupported("Acme offers no refunds"))

    @guarded
    def refund_status(self, refund: OperationRef) -> PspStatus:
        raise fail(AdapterError_NotSupported("Acme offers no refunds"))

    @guarded
    def payout(self, req: PayoutRequest) -> Started:
        raise fail(AdapterError_NotSupported("Acme offers no payouts"))

    @guarded
    def payout_status(self, payout: OperationRef) -> PspStatus:
        raise fail(AdapterError_NotSupported("Acme offers no payouts"))

    @guarded
    def parse_callback(self, req: Inbound) -> List[CallbackUpdate]:
        """A signed callback about one collection, reported under our id."""
        method(req, ("POST",), "Acme callbacks")
        SIGNATURE.verify(req)
        event = ACME.read("callback", bytes(req.body), wire.event)
        return [CallbackUpdate(kind=SubjectKind.PAYMENT, id=event.reference,
                               psp_reference=event.id, status=wire.status(event))]

    @guarded
    def predict(self, phone: str) -> Optional[str]:
        return None

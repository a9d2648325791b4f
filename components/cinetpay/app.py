"""Live adapter for CinetPay (Côte d'Ivoire, Benin, Togo), written in Python
and built into a component by componentize-py: the Payment API v2.

- `initiate` opens a payment link for our payment id (CinetPay's
  `transaction_id`) with the customer's number locked, and returns
  `initiated::redirect` to CinetPay's page. CinetPay knows the payment by
  that `transaction_id` (check, notification): it is the operator's
  reference too; the `payment_token` only opens the page. The link moves no
  money by itself.
- `status` asks `/v2/payment/check` by our id: it works whatever happened
  to the initialisation's answer.
- `parse-callback` checks the notification's `x-token` (HMAC-SHA256 of the
  form's fields with the Secret Key) before reading anything; a signed
  notification is believed only when it says paid, for the amount and
  currency it states, and only for the site configured here. Anything else
  it says is a hint: the service asks `status`.
- CinetPay documents no refund; its transfer API (payouts) is not spoken
  here: both answer `not-supported`.

Settings: `base_url` (required), `site_id` (required), `timeout_ms`,
`channels` (default `MOBILE_MONEY`), `lang` (default `fr`), `operators`,
`approval_window_ms`, `status_per_second`; each as `<key>.<slug>` for one
market. Secrets: `api_key`, `secret_key` (the notifications' HMAC key).
"""

from typing import List, Optional

import transformers as wire
from mmc_adapter import exchange, settings, spec
from mmc_adapter.entry import guarded
from mmc_adapter.exchange import Declined, Provider
from mmc_adapter.types import (
    AdapterError_InvalidResponse,
    AdapterError_NotSupported,
    AdapterError_Rejected,
    AdapterError_Unauthenticated,
    CallbackUpdate,
    Inbound,
    Initiated,
    Initiated_Redirect,
    Initiated_Refused,
    InitiateRequest,
    OperationRef,
    OperatorInfo,
    OtpOutcome,
    PayoutRequest,
    PspStatus,
    Redirect,
    RefundRequest,
    Started,
    SubjectKind,
    fail,
    failure,
)
from mmc_adapter.webhook import constant_time_eq, header, hmac_sha256_hex

SPEC = spec.Spec(
    provider="CinetPay",
    family=("orange-ci", "mtn-ci", "moov-ci", "wave-ci", "mtn-bj", "moov-bj",
            "togocom-tg", "moov-tg"),
    # CinetPay documents no lifetime for a payment link: the customer may
    # pay for as long as the link is open; the setting says how long.
    approval_window_ms=30 * 60 * 1000,
)

CINETPAY = Provider(name="CinetPay")


class Api:
    """CinetPay's Payment API for one served operator."""

    def __init__(self, operator: str):
        market = SPEC.market(operator)
        self.market = market
        self.base_url = market.base_url()
        self.site_id = market.required("site_id")
        self.api_key = market.secret("api_key")
        self.timeout_ms = market.timeout_ms()

    def post(self, path: str, body: bytes):
        return CINETPAY.send(
            "POST", f"{self.base_url}{path}", [("Content-Type", "application/json")],
            body, self.timeout_ms)

    def answer(self, what: str, body: bytes) -> wire.Coded:
        return CINETPAY.read(what, body, wire.coded)


def settings_refusal(answer: wire.Coded) -> Optional[AdapterError_Rejected]:
    """A refusal of our own settings (credentials, site): nothing performed."""
    if answer.code in wire.OUR_SETTINGS:
        return AdapterError_Rejected(
            f"CinetPay refused our settings ({answer.code} {answer.message}): "
            f"{answer.description}")
    return None


def check(api: Api, transaction_id: str) -> PspStatus:
    """The payment as `/v2/payment/check` states it, by our id."""
    body = wire.check_body(api_key=api.api_key, site_id=api.site_id,
                           transaction_id=transaction_id)
    reply = CINETPAY.reply(api.post("/v2/payment/check", body), (200,))
    answer = api.answer("payment check", reply.response.body)
    ours = settings_refusal(answer)
    if ours is not None:
        raise fail(ours)
    status = wire.check_status(answer)
    if status is None:
        # Declined or not, an answer without a readable status says nothing
        # final: asked again later.
        raise fail(AdapterError_InvalidResponse(
            f"CinetPay check without a readable status ({answer.code} {answer.message})"))
    return status


def verify(req: Inbound, fields: dict) -> None:
    """The `x-token` over the form's fields, and the site it names."""
    secret = settings.secret("secret_key", req.operator)
    if secret is None:
        # Never accept what we cannot check.
        raise fail(AdapterError_Unauthenticated("secret_key not configured"))
    token = header(req.headers, "x-token")
    if not token:
        raise fail(AdapterError_Unauthenticated("no x-token header"))
    expected = hmac_sha256_hex(secret, wire.signed_message(fields))
    if not constant_time_eq(token.strip().lower().encode(), expected.encode()):
        raise fail(AdapterError_Unauthenticated("the notification's x-token does not match"))
    site_id = settings.setting("site_id", req.operator)
    if site_id is not None and fields.get("cpm_site_id", "") != site_id.strip():
        raise fail(AdapterError_Unauthenticated("a notification for another CinetPay site"))


class Operator:
    """The `mmc:adapter/operator` export."""

    @guarded
    def describe(self) -> List[OperatorInfo]:
        return SPEC.describe()

    @guarded
    def initiate(self, req: InitiateRequest) -> Initiated:
        api = Api(req.operator)
        if req.amount % 5 != 0:
            # CinetPay takes amounts in multiples of 5 only: nothing is sent.
            return Initiated_Refused(failure(
                "invalid_amount", "CinetPay takes amounts in multiples of 5 only."))
        if req.return_url is None:
            raise fail(AdapterError_Rejected("CinetPay needs a return URL for the customer"))
        body = wire.init_body(
            api_key=api.api_key, site_id=api.site_id, transaction_id=req.payment_id,
            amount=req.amount, currency=req.currency,
            description=req.description or req.reference, notify_url=req.callback_url,
            return_url=req.return_url, channels=api.market.setting("channels") or "MOBILE_MONEY",
            lang=api.market.setting("lang") or "fr", metadata=req.reference, phone=req.phone)
        reply = CINETPAY.reply(api.post("/v2/payment", body), (200, 201))
        if isinstance(reply, Declined):
            # A 4xx: nothing was created, whatever its body says.
            try:
                answer = api.answer("refusal", reply.response.body)
            except Exception:
                raise fail(CINETPAY.unexpected(reply.response))
            return self._refused(answer)
        answer = api.answer("payment initialisation", reply.response.body)
        if answer.code != wire.CREATED:
            return self._refused(answer)
        link = wire.payment_link(answer)
        if link is None:
            raise fail(AdapterError_InvalidResponse(
                f"CinetPay payment link without payment_token or payment_url: "
                f"{exchange.excerpt(reply.response.body)}"))
        return Initiated_Redirect(Redirect(psp_reference=req.payment_id, url=link.url))

    @staticmethod
    def _refused(answer: wire.Coded) -> Initiated:
        ours = settings_refusal(answer)
        if ours is not None:
            raise fail(ours)
        return Initiated_Refused(wire.refusal(answer))

    @guarded
    def confirm_otp(self, payment: OperationRef, otp: str) -> OtpOutcome:
        raise fail(AdapterError_NotSupported("CinetPay payments are made on CinetPay's page"))

    @guarded
    def status(self, payment: OperationRef) -> PspStatus:
        return check(Api(payment.operator), payment.id)

    @guarded
    def cancel(self, payment: OperationRef) -> PspStatus:
        # CinetPay cannot withdraw a payment link: report where it stands.
        return check(Api(payment.operator), payment.id)

    @guarded
    def refund(self, req: RefundRequest) -> Started:
        raise fail(AdapterError_NotSupported("CinetPay offers no refunds"))

    @guarded
    def refund_status(self, refund: OperationRef) -> PspStatus:
        raise fail(AdapterError_NotSupported("CinetPay offers no refunds"))

    @guarded
    def payout(self, req: PayoutRequest) -> Started:
        raise fail(AdapterError_NotSupported("this adapter does not make CinetPay transfers"))

    @guarded
    def payout_status(self, payout: OperationRef) -> PspStatus:
        raise fail(AdapterError_NotSupported("this adapter does not make CinetPay transfers"))

    @guarded
    def parse_callback(self, req: Inbound) -> List[CallbackUpdate]:
        if req.method.upper() != "POST":
            raise fail(AdapterError_Rejected("CinetPay notifications are POSTs"))
        fields = wire.notification(req.body)
        if fields is None:
            raise fail(AdapterError_Unauthenticated(
                "not a CinetPay notification (no signed form)"))
        verify(req, fields)
        status = wire.notification_status(fields)
        if status is None:
            raise fail(AdapterError_InvalidResponse(
                "a paid CinetPay notification without its amount or currency"))
        ours = fields["cpm_trans_id"]
        return [CallbackUpdate(kind=SubjectKind.PAYMENT, id=ours, psp_reference=ours,
                               status=status)]

    @guarded
    def predict(self, phone: str) -> Optional[str]:
        return None

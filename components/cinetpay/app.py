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
  form's fields with the Secret Key) before reading anything, and only for
  the site configured here; it reports what a signed notification says, and
  the service takes every notification as a hint: it asks `status` and
  records what that answers.
- `payout` speaks CinetPay's transfer API: a token (kept in the host's
  cache for 4 of its 5 minutes), the beneficiary added as a contact (money
  goes only to contacts), then one transfer under our payout id as its
  `client_transaction_id`. CinetPay refuses an id it has seen, so a retry
  never pays twice: it is answered with the earlier transfer, read by our
  id. A failure before the transfer is sent leaves nothing sent.
- `payout-status` asks `/v1/transfer/check/money` by our id.
- A transfer notification is not signed: only a hint, the service asks.
- CinetPay documents no refund: `not-supported`.
- `books`: the transfer account's balance (`/v1/transfer/check/balance`:
  `available`, and `inUsing` as reserved), one per set of credentials,
  paying out to the operators served with them. CinetPay publishes no
  statement: its operations are read back by status.

Settings: `base_url` (required), `site_id` (required), `timeout_ms`,
`channels` (default `MOBILE_MONEY`), `lang` (default `fr`), `operators`,
`approval_window_ms`, `status_per_second`; for payouts `transfer_base_url`
(default `https://client.cinetpay.com`) and `transfer_notify_url`
(required by CinetPay: where it notifies transfers); each as `<key>.<slug>`
for one market. Secrets: `api_key`, `secret_key` (the notifications' HMAC
key), `transfer_password` (the transfer API's password).
"""

from typing import List, Optional
from urllib.parse import urlencode

import transformers as wire
from mmc_adapter import exchange, lookup, settings, spec
from mmc_adapter.books import NoBooks, balance
from wit_world.exports import books as wire_types
from mmc_adapter.entry import guarded
from mmc_adapter.exchange import Declined, Provider
from mmc_adapter.types import (
    AdapterError_InvalidResponse,
    AdapterError_NotSupported,
    AdapterError_Rejected,
    AdapterError_Unauthenticated,
    AdapterError_Unavailable,
    CallbackUpdate,
    Err,
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
    PspStatus_Failed,
    PspStatus_NotFound,
    PspStatus_Pending,
    Redirect,
    RefundRequest,
    Started,
    SubjectKind,
    fail,
    failure,
)
from mmc_adapter.webhook import constant_time_eq, header, hmac_sha256_hex
from wit_world.imports import cache

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


DEFAULT_TRANSFER_BASE_URL = "https://client.cinetpay.com"
# A transfer token lives 5 minutes at CinetPay: kept for 4.
TOKEN_TTL_MS = 4 * 60 * 1000
FORM = [("Content-Type", "application/x-www-form-urlencoded")]


class Transfers:
    """CinetPay's transfer API for one served operator."""

    def __init__(self, operator: str):
        market = SPEC.market(operator)
        self.market = market
        base_url = market.setting("transfer_base_url") or DEFAULT_TRANSFER_BASE_URL
        self.base_url = base_url.strip().rstrip("/")
        self.api_key = market.secret("api_key")
        self.password = market.secret("transfer_password")
        self.lang = (market.setting("lang") or "fr").strip()
        self.timeout_ms = market.timeout_ms()
        self.currency = market.op.currency
        self.token_key = f"transfer-token.{market.slug}"

    def send(self, method: str, path: str, query: dict, body: bytes = b""):
        url = f"{self.base_url}{path}?{urlencode(dict(query, lang=self.lang))}"
        resp = CINETPAY.send(method, url, FORM if body else [], body, self.timeout_ms)
        if resp.status in (401, 403):
            # Our token or credentials refused: the next call logs in afresh.
            cache.set(self.token_key, b"", 0)
        return resp

    def answer(self, what: str, resp) -> wire.TransferAnswer:
        """The envelope of a 200, or of a 4xx other than ours (the operator
        declining, with its code); anything else is an error."""
        reply = CINETPAY.reply(resp, (200,))
        return CINETPAY.read(what, reply.response.body, wire.transfer_answer)

    def refused_because_of_us(self, what: str, answer: wire.TransferAnswer) -> None:
        if answer.code in wire.TRANSFER_OUR_SETTINGS:
            cache.set(self.token_key, b"", 0)
            raise fail(AdapterError_Rejected(
                f"CinetPay refused our {what} ({answer.code} {answer.message}): "
                f"{answer.description}"))

    def token(self) -> str:
        cached = cache.get(self.token_key)
        if cached:
            return bytes(cached).decode("utf-8")
        body = wire.login_body(api_key=self.api_key, password=self.password)
        answer = self.answer("transfer login", self.send("POST", "/v1/auth/login", {}, body))
        self.refused_because_of_us("transfer login", answer)
        token = wire.token(answer)
        if answer.code != wire.TRANSFER_SUCCESS or token is None:
            raise fail(AdapterError_InvalidResponse(
                f"CinetPay transfer login without a token ({answer.code} {answer.message})"))
        cache.set(self.token_key, token.encode("utf-8"), TOKEN_TTL_MS)
        return token

    def add_contact(self, token: str, prefix: str, phone: str, name: str) -> None:
        """The beneficiary among our contacts (one there already is fine)."""
        body = wire.contact_body(prefix=prefix, phone=phone, name=name)
        answer = self.answer("contact",
                             self.send("POST", "/v1/transfer/contact", {"token": token}, body))
        self.refused_because_of_us("contact", answer)
        codes = [wire.item_code(r) for r in wire.items(answer)]
        if answer.code != wire.TRANSFER_SUCCESS or any(
                c not in (wire.TRANSFER_SUCCESS, wire.CONTACT_EXISTS) for c in codes):
            raise fail(AdapterError_Rejected(
                f"CinetPay refused the beneficiary as a contact ({answer.code} "
                f"{answer.message}; {', '.join(codes)}): {answer.description}"))

    def check(self, token: str, ours: str) -> PspStatus:
        """The transfer under our id as `/v1/transfer/check/money` states it."""
        query = {"token": token, "client_transaction_id": ours}
        answer = self.answer("transfer check",
                             self.send("GET", "/v1/transfer/check/money", query))
        self.refused_because_of_us("transfer check", answer)
        if answer.code == wire.TRANSFER_NOT_FOUND:
            return PspStatus_NotFound()
        if answer.code != wire.TRANSFER_SUCCESS:
            raise fail(AdapterError_InvalidResponse(
                f"CinetPay transfer check answered {answer.code} {answer.message}"))
        mine = [r for r in wire.items(answer) if str(r.get("client_transaction_id")) == ours]
        found = lookup.pick(mine, lambda r: str(r.get("treatment_status")).upper() == "VAL")
        status = lookup.status_of(found, lambda r: wire.transfer_status(r, self.currency))
        if status is None:
            raise fail(AdapterError_InvalidResponse(
                "a done CinetPay transfer without its amount"))
        return status


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
        api = Transfers(req.operator)
        notify_url = api.market.required("transfer_notify_url")
        prefix = wire.COUNTRY_PREFIX[api.market.op.country]
        digits = "".join(c for c in req.phone if c.isdigit())
        if not digits.startswith(prefix) or len(digits) <= len(prefix) + 6:
            raise fail(AdapterError_Rejected(
                f"{req.phone} is not a number of {api.market.op.country} (+{prefix})"))
        phone = digits[len(prefix):]
        # The calls before the transfer: whatever their ending, nothing was sent.
        try:
            token = api.token()
            api.add_contact(token, prefix, phone, req.beneficiary_name)
        except Err as e:
            raise fail(exchange.before_sending("CinetPay transfer set-up", e.value))
        body = wire.transfer_body(prefix=prefix, phone=phone, amount=req.amount,
                                  client_transaction_id=req.payout_id, notify_url=notify_url)
        answer = api.answer("transfer", api.send(
            "POST", "/v1/transfer/money/send/contact", {"token": token}, body))
        api.refused_because_of_us("transfer", answer)
        records = wire.items(answer)
        code = answer.code
        if code == wire.TRANSFER_SUCCESS and records:
            code = wire.item_code(records[0])
        if code == wire.TRANSFER_SUCCESS and records:
            reference = str(records[0].get("transaction_id") or req.payout_id)
            status = wire.transfer_status(records[0], api.currency)
            if status is None:
                raise fail(AdapterError_InvalidResponse(
                    "a done CinetPay transfer without its amount"))
            return Started(psp_reference=reference, status=status)
        if code == wire.TRANSFER_ID_EXISTS:
            # An earlier attempt under our id was taken: that one is reported.
            try:
                status = api.check(token, req.payout_id)
            except Err as e:
                raise fail(AdapterError_Unavailable(
                    f"a CinetPay transfer exists under our id and could not be read: "
                    f"{getattr(e.value, 'value', e.value)}"))
            return Started(psp_reference=req.payout_id, status=status)
        if code in wire.TRANSFER_REFUSED:
            return Started(psp_reference=req.payout_id, status=PspStatus_Failed(
                wire.transfer_refusal(code, answer.message, answer.description)))
        # Anything else says nothing certain: asked again by our id.
        raise fail(AdapterError_InvalidResponse(
            f"CinetPay transfer answered {code} {answer.message}: {answer.description}"))

    @guarded
    def payout_status(self, payout: OperationRef) -> PspStatus:
        api = Transfers(payout.operator)
        return api.check(api.token(), payout.id)

    @guarded
    def parse_callback(self, req: Inbound) -> List[CallbackUpdate]:
        if req.method.upper() != "POST":
            raise fail(AdapterError_Rejected("CinetPay notifications are POSTs"))
        transfer = wire.transfer_notification(req.body)
        if transfer is not None:
            # Not signed: it names a transfer of ours, nothing more; the
            # service asks its status.
            return [CallbackUpdate(kind=SubjectKind.PAYOUT,
                                   id=transfer["client_transaction_id"],
                                   psp_reference=transfer.get("transaction_id") or None,
                                   status=PspStatus_Pending())]
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


class Books(NoBooks):
    provider = "CinetPay"

    @guarded
    def balances(self) -> List[wire_types.Balance]:
        # Markets sharing credentials share one transfer account.
        accounts: dict = {}
        for op in SPEC.served():
            api = Transfers(op.slug)
            accounts.setdefault((api.base_url, api.api_key), (api, []))[1].append(op.slug)
        if not accounts:
            raise fail(AdapterError_NotSupported("CinetPay serves no operator here"))
        out = []
        for api, slugs in accounts.values():
            answer = api.answer("transfer balance", api.send(
                "GET", "/v1/transfer/check/balance", {"token": api.token()}))
            api.refused_because_of_us("transfer balance", answer)
            held = wire.transfer_balance(answer) if answer.code == wire.TRANSFER_SUCCESS else None
            if held is None:
                raise fail(AdapterError_InvalidResponse(
                    f"CinetPay transfer balance answered {answer.code} {answer.message}"))
            name = "transfers" if len(accounts) == 1 else f"transfers {slugs[0]}"
            out.append(balance(name, api.currency, held.available, reserved=held.in_using,
                               pays_out=slugs))
        return out

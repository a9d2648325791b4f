"""A merchant's first afternoon with the Python SDK that openapi-python-client
generates from the live document: create, list, read, cancel and refund
payments, register a webhook endpoint, create bulk payments from JSON and CSV.

Run by tests/api/sdk.rs: python3 python_sdk.py <package dir> <base url> <test key> <webhook url>
Every step asserts; the first failure ends the script with a traceback.
"""

import sys
import time
import uuid

package_dir, base_url, api_key, webhook_url = sys.argv[1:5]
sys.path.insert(0, package_dir)

from mmc_client import AuthenticatedClient  # noqa: E402
from mmc_client.api.bulk_payments import (  # noqa: E402
    create_bulk_payment,
    get_bulk_payment,
    import_bulk_payment_csv,
)
from mmc_client.api.payments import (  # noqa: E402
    cancel_payment,
    create_payment,
    get_payment,
    list_payments,
)
from mmc_client.api.refunds import get_refund, refund_payment  # noqa: E402
from mmc_client.api.webhooks import (  # noqa: E402
    create_webhook_endpoint,
    list_webhook_endpoints,
)
from mmc_client.models import (  # noqa: E402
    BulkPayment,
    CreateBulkPayment,
    CreateBulkPaymentItem,
    CreatePaymentBJDirect,
    CreateRefund,
    CreateWebhookEndpoint,
    DirectCustomerBJ,
    EnabledEvent,
    Error,
    OperatorBJ,
    Payment,
    PaymentList,
    PaymentStatus,
    Refund,
    RefundReason,
    WebhookEndpoint,
    WebhookEndpointList,
)
from mmc_client.types import File  # noqa: E402

client = AuthenticatedClient(base_url=f"{base_url}/api/v1", token=api_key, raise_on_unexpected_status=True)


def ok(result, kind):
    assert isinstance(result, kind), f"expected {kind.__name__}, got {result!r}"
    return result


def new_payment(phone: str) -> Payment:
    body = CreatePaymentBJDirect(
        reference=f"sdk-py-{uuid.uuid4()}",
        amount=1500,
        currency="XOF",
        country="BJ",
        operator=OperatorBJ.MTN_BJ,
        customer=DirectCustomerBJ(phone=phone, first_name="Awa", last_name="Koné"),
        mode="direct",
        description="Python SDK",
    )
    # The header is a plain string: str(uuid4()), as the document says.
    resp = create_payment.sync_detailed(client=client, body=body, idempotency_key=str(uuid.uuid4()))
    assert resp.status_code == 201, resp.content
    return ok(resp.parsed, Payment)


# Create: one that completes (…0001) and one that stays in progress (…0004).
paid = new_payment("+2290166000001")
waiting = new_payment("+2290166000004")
assert paid.reference.startswith("sdk-py-")

# Read (asking the operator) until the first one completes.
deadline = time.time() + 30
while True:
    read = ok(get_payment.sync(paid.id, client=client, sync=True), Payment)
    if read.status == PaymentStatus.COMPLETED:
        break
    assert time.time() < deadline, f"payment still {read.status}"
    time.sleep(0.3)

# List.
page = ok(list_payments.sync(client=client, limit=100), PaymentList)
ids = {str(p.id) for p in page.data}
assert {str(paid.id), str(waiting.id)} <= ids, ids

# Cancel the one still in progress.
cancelled = ok(cancel_payment.sync(str(waiting.id), client=client), Payment)
assert cancelled.status == PaymentStatus.CANCELLED, cancelled.status

# Refund part of the completed one, then read the refund.
resp = refund_payment.sync_detailed(
    str(paid.id),
    client=client,
    body=CreateRefund(amount=500, reason=RefundReason.DUPLICATE),
    idempotency_key=str(uuid.uuid4()),
)
assert resp.status_code == 201, resp.content
refund = ok(resp.parsed, Refund)
assert refund.amount == 500
assert ok(get_refund.sync(str(refund.id), client=client), Refund).id == refund.id

# A webhook endpoint.
resp = create_webhook_endpoint.sync_detailed(
    client=client,
    body=CreateWebhookEndpoint(url=webhook_url, enabled_events=[EnabledEvent("collect.payment.completed")], description="SDK"),
)
assert resp.status_code == 201, resp.content
endpoint = ok(resp.parsed, WebhookEndpoint)
assert isinstance(endpoint.secret, str) and endpoint.secret
listed = ok(list_webhook_endpoints.sync(client=client), WebhookEndpointList)
assert endpoint.id in {e.id for e in listed.data}

# A bulk payment from JSON...
items = [
    CreateBulkPaymentItem(
        beneficiary_name="Awa Koné",
        phone="+2290166000001",
        amount=5000,
        currency="XOF",
        reference="PY-001",
    ),
    CreateBulkPaymentItem(
        beneficiary_name="Kofi Mensah",
        phone="+22890000001",
        amount=3500,
        currency="XOF",
        reference="PY-002",
    ),
]
resp = create_bulk_payment.sync_detailed(
    client=client,
    body=CreateBulkPayment(name="SDK batch", items=items),
    idempotency_key=str(uuid.uuid4()),
)
assert resp.status_code == 201, resp.content
batch = ok(resp.parsed, BulkPayment)
assert batch.item_count == 2 and batch.total_amount == 8500 and batch.source == "api"
assert ok(get_bulk_payment.sync(str(batch.id), client=client), BulkPayment).id == batch.id

# ...and from a CSV file (text/csv).
csv = "beneficiary_name,phone,amount,currency,reference\r\n" '"Koné, Awa",+2290166000001,2000,XOF,CSV-001\r\n'
resp = import_bulk_payment_csv.sync_detailed(
    client=client,
    body=File(payload=csv.encode(), file_name="batch.csv", mime_type="text/csv"),
    name="SDK CSV batch",
    idempotency_key=str(uuid.uuid4()),
)
assert resp.status_code == 201, resp.content
assert ok(resp.parsed, BulkPayment).source == "csv"

# An error comes back typed.
missing = get_payment.sync("no-such-payment", client=client)
assert isinstance(missing, Error) and missing.error.code == "payment_not_found", missing

print("python sdk: ok")

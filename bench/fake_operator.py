"""`python3 bench/fake_operator.py PORT`: the operator side of `make bench`'s
creates through a live adapter, on this machine. It answers, as the
providers document them, the calls a payment that stays open makes:

- Wave Checkout: `POST /v1/checkout/sessions` opens a session (`open`,
  `processing`, its `wave_launch_url`); `GET /v1/checkout/sessions/{id}`
  reads it back, still open.
- CinetPay Payment API: `POST /v2/payment` opens a payment link (`201
  CREATED`, its `payment_url`); `POST /v2/payment/check` says the customer
  has not paid yet (`WAITING_FOR_CUSTOMER`).

Nothing is stored: the bench measures the service's path through the
adapter, not the operator. HTTP/1.1 with keep-alive, one thread per
connection, as the adapters' connection pool reuses them.
"""

import json
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def session(session_id, reference="", amount="1500"):
    return {
        "id": session_id,
        "amount": amount,
        "currency": "XOF",
        "checkout_status": "open",
        "payment_status": "processing",
        "client_reference": reference,
        "wave_launch_url": f"https://pay.wave.com/c/{session_id}",
        "when_created": "2026-01-01T00:00:00Z",
        "when_expires": "2026-01-01T00:30:00Z",
        "last_payment_error": None,
        "transaction_id": None,
    }


class Operator(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: without this, Nagle's algorithm
    # holds the body until the client's delayed ACK, 40 ms a call.
    disable_nagle_algorithm = True

    def log_message(self, *_):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def do_POST(self):
        sent = self.body()
        if self.path == "/v1/checkout/sessions":
            reference = sent.get("client_reference", "")
            amount = sent.get("amount", "1500")
            return self.answer(200, session(f"cos-{uuid.uuid4().hex}", reference, amount))
        if self.path == "/v2/payment":
            token = uuid.uuid4().hex
            return self.answer(200, {
                "code": "201",
                "message": "CREATED",
                "description": "Transaction created with success",
                "data": {
                    "payment_token": token,
                    "payment_url": f"https://checkout.cinetpay.com/payment/{token}",
                },
            })
        if self.path == "/v2/payment/check":
            return self.answer(200, {
                "code": "662",
                "message": "WAITING_CUSTOMER_PAYMENT",
                "data": {"amount": "1500", "currency": "XOF", "status": "WAITING_FOR_CUSTOMER"},
            })
        self.answer(404, {"message": f"no route {self.path}"})

    def do_GET(self):
        prefix = "/v1/checkout/sessions/"
        if self.path.startswith(prefix + "search"):
            return self.answer(200, {"result": []})
        if self.path.startswith(prefix) and "/" not in self.path[len(prefix):]:
            return self.answer(200, session(self.path[len(prefix):]))
        self.answer(404, {"message": f"no route {self.path}"})


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Operator)
    server.daemon_threads = True
    server.serve_forever()

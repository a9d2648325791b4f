"""An OTLP/HTTP receiver for benchmarks: answers every POST 200 and counts the
requests (GET /count), so that exporting spans costs the service what a
collector on the same machine would."""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

received = 0


class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        global received
        self.rfile.read(int(self.headers.get("content-length", 0)))
        received += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        body = str(received).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()

"""An HTTP proxy in front of an inference server that breaks some of its answers, for the http
rollout backend's fault tests (tests/serve/test_http_rollout.sh).

    fault_proxy.py PORT_FILE UPSTREAM_URL TIMEOUT_SECONDS

Listens on a free port (written to PORT_FILE) and forwards every request to UPSTREAM_URL, except
that every third /generate or /v1/completions request gets one fault, in turn: HTTP 500, a body
that is not JSON, a log-prob list one shorter than the ids, a null log-prob, an answer held past
TIMEOUT_SECONDS, and a connection closed without an answer. A retry is a new request, so it is
answered. Counts of each fault are printed on SIGTERM.
"""

import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, UPSTREAM, TIMEOUT = sys.argv[1], sys.argv[2].rstrip("/"), float(sys.argv[3])
FAULTS = ["status_500", "not_json", "short_logprobs", "null_logprob", "too_slow", "dropped"]
lock = threading.Lock()
state = {"generation_requests": 0, **{f: 0 for f in FAULTS}}


def forward(method, path, body):
    req = urllib.request.Request(UPSTREAM + path, data=body, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def break_logprobs(body, how):
    j = json.loads(body)
    if "meta_info" in j:
        lps = j["meta_info"]["output_token_logprobs"]
        if how == "short":
            lps.pop()
        else:
            lps[0][0] = None
    else:
        lp = j["choices"][0]["logprobs"]["token_logprobs"]
        if how == "short":
            lp.pop()
        else:
            lp[0] = None
    return json.dumps(j).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(*forward("GET", self.path, None))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        fault = None
        if self.path in ("/generate", "/v1/completions"):
            with lock:
                state["generation_requests"] += 1
                n = state["generation_requests"]
                if n % 3 == 0:
                    fault = FAULTS[(n // 3) % len(FAULTS)]
                    state[fault] += 1
        if fault == "status_500":
            return self.answer(500, b'{"error": {"message": "injected fault"}}')
        if fault == "not_json":
            return self.answer(200, b'{"text": "half a bo')
        if fault == "dropped":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault == "too_slow":
            time.sleep(TIMEOUT + 1)
        status, answer = forward("POST", self.path, body)
        if status == 200 and fault in ("short_logprobs", "null_logprob"):
            answer = break_logprobs(answer, "short" if fault == "short_logprobs" else "null")
        try:
            self.answer(status, answer)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (too_slow): expected


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True


def stop(*_):
    print(json.dumps(state), flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()

"""`astraflow serve` under hostile input for a bounded time (docs/rollout-backends.md, "Limits").

    serve_soak.py PORT SERVER_PID SECONDS

The server runs with small limits (test_serve.sh: --max-body-bytes 1 MiB, --max-json-depth 32,
--max-request-tokens 4096, --read-timeout 2, --idle-timeout 2, --http-threads 64). While 300 idle
sockets and 40 half-sent requests sit on it, 24 clients send a mix of good requests and every
kind of bad one for SECONDS. Checks: every good request is answered 200 with its tokens, every
bad one a 4xx (never a 5xx, never a dropped connection), the refusals are counted by reason in
GET /get_server_info, a real client is answered while the idle sockets are open, /health is fine
at the end, and the server's resident memory is back near where it started.
"""

import json
import random
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

PORT, PID, SECONDS = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
BASE = f"http://127.0.0.1:{PORT}"


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def rss_mb():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def raw(method, path, data=None, timeout=60):
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def body(obj):
    return json.dumps(obj).encode()


GOOD = [
    ("/generate", body({"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}})),
    ("/v1/completions", body({"model": "tiny", "prompt": [5, 6, 7], "max_tokens": 4})),
    ("/v1/completions", body({"model": "tiny", "prompt": "hello there", "max_tokens": 3, "n": 2})),
]
# (path, body, the error code the answer must carry, or None for any 4xx)
BAD = [
    ("/generate", b"x" * (2 << 20), "body_too_large"),
    ("/generate", b"[" * 5000 + b"]" * 5000, "json_too_deep"),
    ("/v1/completions", body({"model": "tiny", "prompt": [5] * 8, "max_tokens": 2000, "n": 4}), "request_too_large"),
    ("/generate", body({"input_ids": [5] * 5000, "sampling_params": {"max_new_tokens": 1}}), None),
    ("/generate", body({"input_ids": [10**9], "sampling_params": {"max_new_tokens": 1}}), None),
    ("/v1/completions", body({"model": "tiny", "prompt": {"not": "a prompt"}, "max_tokens": 2}), None),
    ("/v1/completions", body({"model": "tiny", "prompt": [5, 6], "max_tokens": 2, "logit_bias": {"x": -100}}), None),
    ("/v1/completions", b'{"model": "tiny", "prompt": "\xff\xfe bad utf-8", "max_tokens": 2}', None),
    ("/generate", b'{"input_ids": [1, 2,', None),
    ("/generate", b"", None),
    ("/update_weights_from_disk", body({"model_path": "/no/such/folder"}), None),
    ("/v1/chat/completions", body({"model": "tiny", "messages": "not a list"}), None),
]

failures = []
counts = {"good": 0, "bad": 0}
sent_codes = {}
lock = threading.Lock()


def client(seed, deadline):
    rng = random.Random(seed)
    while time.time() < deadline:
        if rng.random() < 0.5:
            path, data = rng.choice(GOOD)
            try:
                status, text = raw("POST", path, data)
            except Exception as e:  # noqa: BLE001 - a dropped connection is a failure
                with lock:
                    failures.append(f"good {path}: {e!r}")
                continue
            if status != 200:
                with lock:
                    failures.append(f"good {path}: {status} {text[:200]!r}")
                continue
            answer = json.loads(text)
            tokens = answer["meta_info"]["completion_tokens"] if path == "/generate" else answer["usage"]["completion_tokens"]
            with lock:
                if tokens < 1:
                    failures.append(f"good {path}: no tokens: {text[:200]!r}")
                counts["good"] += 1
        else:
            path, data, code = rng.choice(BAD)
            try:
                status, text = raw("POST", path, data)
            except Exception as e:  # noqa: BLE001
                with lock:
                    failures.append(f"bad {path} ({code}): {e!r}")
                continue
            with lock:
                counts["bad"] += 1
                if code:
                    sent_codes[code] = sent_codes.get(code, 0) + 1
                if not 400 <= status < 500:
                    failures.append(f"bad {path} ({code}): status {status} {text[:200]!r}")
                elif code and json.loads(text)["error"]["code"] != code:
                    failures.append(f"bad {path}: code {json.loads(text)['error']['code']}, wanted {code}")


# Warm up (the first requests allocate the engine's buffers), then the baseline.
for path, data in GOOD:
    check(raw("POST", path, data)[0] == 200, f"warm-up {path}")
time.sleep(1.5)
start_rss = rss_mb()

# 300 idle sockets and 40 requests that stop halfway, held open through the soak.
idle = []
for _ in range(300):
    s = socket.create_connection(("127.0.0.1", PORT))
    idle.append(s)
half = []
for _ in range(40):
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
    half.append(s)
t0 = time.time()
status, _ = raw("POST", GOOD[0][0], GOOD[0][1], timeout=30)
check(status == 200, f"a real client beside 340 idle or half-sent sockets: {status}")
beside = time.time() - t0

deadline = time.time() + SECONDS
threads = [threading.Thread(target=client, args=(i, deadline)) for i in range(24)]
[t.start() for t in threads]
[t.join() for t in threads]
check(not failures, f"{len(failures)} requests failed; first: {failures[:3]}")
check(counts["good"] > 20 and counts["bad"] > 20, f"too few requests went through: {counts}")

# The half-sent requests were dropped at the read timeout: the server closed them (after an
# error answer, or without one), so reading reaches end of file.
dropped = 0
for s in half:
    s.settimeout(5)
    try:
        while s.recv(4096):
            pass
        dropped += 1
    except ConnectionResetError:
        dropped += 1
    except socket.timeout:
        pass
for s in idle + half:
    s.close()
check(dropped == len(half), f"{len(half) - dropped} half-sent requests still held a connection")

status, info = raw("GET", "/get_server_info")
check(status == 200, f"/get_server_info: {status}")
refused = json.loads(info)["refused"]
for code, n in sent_codes.items():
    check(refused.get(code, 0) >= n, f"refusals of {code}: counted {refused.get(code, 0)}, sent {n}")
check(raw("GET", "/health")[0] == 200, "/health after the soak")
time.sleep(2.5)  # the engine's idle trim runs at most once a second
end_rss = rss_mb()
grew = end_rss - start_rss
print(json.dumps({"good": counts["good"], "bad": counts["bad"], "refused": refused, "beside_idle_s": round(beside, 3),
                  "rss_start_mb": round(start_rss, 1), "rss_end_mb": round(end_rss, 1)}))
check(grew < 40, f"resident memory grew {grew:.1f} MB over the soak ({start_rss:.1f} -> {end_rss:.1f})")

#!/usr/bin/env python3
"""A verifier for astraflow's `command` and `http` rewards (docs/tasks.md, "Your own verifier").

One program, three ways to run it:
  per item     environment.reward: {kind: command, command: [python3, examples/reward_worker.py]}
               astraflow starts it for each response; it reads one object and answers one line.
  persistent   ... add `persistent: true`: started once per rollout rank, it reads one object
               per line and answers one line each, for as long as it runs.
  http         python3 examples/reward_worker.py --http 8011, then
               environment.reward: {kind: http, url: "http://127.0.0.1:8011/reward"}

Each object is {"prompt", "response", "reference", "metadata"}; each answer is
{"reward": <number>, "reason": "correct"|"wrong"|"no_answer"|..., "answer": "<what was read>"}.
This one gives 1 when the last number in the response equals the reference (as a number).
Put your own check in `score`: the loop and the server stay as they are.
"""
import json
import re
import sys

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def score(task):
    numbers = NUMBER.findall(task.get("response", ""))
    if not numbers:
        return {"reward": 0.0, "reason": "no_answer", "answer": ""}
    answer = numbers[-1]
    try:
        ok = float(answer) == float(task.get("reference", ""))
    except ValueError:
        ok = answer == task.get("reference", "")
    return {"reward": 1.0 if ok else 0.0, "reason": "correct" if ok else "wrong", "answer": answer}


def answer_lines():
    # One answer per line, flushed at once: astraflow waits for the newline. (It also sets
    # PYTHONUNBUFFERED=1 for the workers it starts.)
    for line in sys.stdin:
        if not line.strip():
            continue
        sys.stdout.write(json.dumps(score(json.loads(line))) + "\n")
        sys.stdout.flush()


def serve(port):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: astraflow keeps its connection open
        # Headers and body leave in separate writes; with Nagle's algorithm on, the body waits
        # for the client's delayed ACK (~40 ms an item).
        disable_nagle_algorithm = True

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                reply, status = json.dumps(score(json.loads(body))).encode(), 200
            except ValueError as e:
                reply, status = json.dumps({"error": str(e)}).encode(), 400
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve(int(sys.argv[2]))
    else:
        answer_lines()

"""The same games as build/bin/bench_openenv plays, through openenv-core's own Python client
(GenericEnvClient over the /ws endpoint): the reference for the per-step cost of one session.
    bench_openenv_reference.py SERVER_SCRIPT [N]
"""
import json
import socket
import subprocess
import sys
import time
import urllib.request

from openenv.core.generic_client import GenericEnvClient


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    script, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 256
    port = free_port()
    server = subprocess.Popen([sys.executable, script, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        steps = 0
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as env:
            start = time.perf_counter()
            for seed in range(n):
                env.reset(seed=seed, turns=5)
                low, high = 1, 16
                while True:
                    guess = (low + high) // 2
                    r = env.step({"message": str(guess)})
                    steps += 1
                    if r.done:
                        break
                    if "Higher." in r.observation["prompt"]:
                        low = guess + 1
                    else:
                        high = guess - 1
            wall = time.perf_counter() - start
        print(json.dumps({"client": "openenv-core GenericEnvClient", "sessions": 1, "episodes": n, "steps": steps,
                          "seconds": round(wall, 3), "episodes_per_s": round(n / wall, 1),
                          "ms_per_step": round(1e3 * wall / steps, 3)}))
    finally:
        server.kill()


if __name__ == "__main__":
    main()

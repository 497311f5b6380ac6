"""An OpenEnv-shaped WebSocket server that misbehaves on purpose (tests/tasks/test_openenv.cpp).

It answers GET /health and speaks the /ws protocol of openenv-core, but each episode's `step`
does what the reset's "mode" says: ok (an observation), garbage (not JSON), error (an OpenEnv
error message), wrong (an observation that is a string), types (a reward and a `done` of the
wrong types), typeless (a `type` that is not a string), slow (answers after 5 s), huge (a
17 MiB message), hangup (closes the connection), exit (the whole server exits).
"""
import asyncio
import json
import os
import sys

from websockets.asyncio.server import serve
from websockets.http11 import Response
from websockets.datastructures import Headers


def health(connection, request):
    if request.path == "/health":
        return Response(200, "OK", Headers([("Content-Type", "application/json")]), b'{"status":"healthy"}')
    return None


def observation(text, reward=0.0, done=False):
    return json.dumps({"type": "observation",
                       "data": {"observation": {"text": text}, "reward": reward, "done": done}})


async def session(ws):
    mode = "ok"
    async for raw in ws:
        message = json.loads(raw)
        if message["type"] == "close":
            await ws.close()
            return
        if message["type"] == "reset":
            mode = message["data"].get("mode", "ok")
            await ws.send(observation(f"mode {mode}, seed {message['data'].get('seed')}"))
            continue
        if mode == "ok":
            await ws.send(observation("fine", 0.5, True))
        elif mode == "garbage":
            await ws.send("this is not JSON {")
        elif mode == "error":
            await ws.send(json.dumps({"type": "error", "data": {"message": "boom", "code": "EXECUTION_ERROR"}}))
        elif mode == "wrong":
            await ws.send(json.dumps({"type": "observation", "data": {"observation": "a string"}}))
        elif mode == "types":
            await ws.send(json.dumps({"type": "observation",
                                      "data": {"observation": {"text": "t"}, "reward": "high", "done": "yes"}}))
        elif mode == "typeless":
            await ws.send(json.dumps({"type": 5, "data": []}))
        elif mode == "slow":
            await asyncio.sleep(5)
            await ws.send(observation("late"))
        elif mode == "huge":
            await ws.send(observation("x" * (17 << 20)))
        elif mode == "hangup":
            ws.transport.abort()  # no close frame: the connection just drops
            return
        elif mode == "exit":
            os._exit(3)


async def main(port):
    async with serve(session, "127.0.0.1", port, process_request=health, max_size=None):
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))

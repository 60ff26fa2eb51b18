"""cpdit serve warm: starts `cpdit serve` on a preset (flux-mini by default), sends a job, then the same
again (--repeats), through POST /v1/jobs and prints, for each, the seconds from the POST to the job
running, to its denoising loop starting (the text encoded: the server's denoise_started) and to its
first step done (polled every 5 ms), beside the server's start-up (the load a CLI call pays every time).
Every request after the first finds the model resident. Loopback only.

Usage: python3 bench/serve_client.py [--binary build/bin/cpdit] [--preset flux-mini] [--repeats 2]"""

import argparse
import json
import pathlib
import statistics
import subprocess
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]


def call(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=600) as answer:
        return json.loads(answer.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=str(ROOT / "build" / "bin" / "cpdit"))
    parser.add_argument("--preset", default="flux-mini")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="requests after the first")
    args = parser.parse_args()
    start = time.monotonic()
    server = subprocess.Popen([args.binary, "serve", "--preset", args.preset, "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        url = server.stdout.readline().strip().rsplit(" ", 1)[1]
        print(f"server up in {time.monotonic() - start:.2f} s (its model loaded once): {url}")
        to_step = []
        for i in range(1 + args.repeats):
            posted, posted_unix = time.monotonic(), time.time()
            job = call(url + "/v1/jobs", "POST", {"prompt": "a red fox in the snow", "steps": args.steps, "seed": i})
            running = None
            while True:
                state = call(f"{url}/v1/jobs/{job['id']}")
                now = time.monotonic()
                if running is None and state["status"] != "queued":
                    running = now - posted
                if state["step"] >= 1 or state["status"] not in ("queued", "running"):
                    break
                time.sleep(0.005)
            first_step = now - posted
            denoise = state["denoise_started"] - posted_unix
            while call(f"{url}/v1/jobs/{job['id']}")["status"] in ("queued", "running"):
                time.sleep(0.01)
            done = time.monotonic() - posted
            print(f"request {i + 1}: running after {running:.3f} s, denoising from {denoise:.3f} s, first step done "
                  f"after {first_step:.3f} s, done after {done:.3f} s")
            if i > 0:
                to_step.append((denoise, first_step))
        for index, what in [(0, "the first step starts"), (1, "the first step is done")]:
            values = [t[index] for t in to_step]
            print(f"warm requests: until {what} min {min(values):.3f} s, median {statistics.median(values):.3f} s "
                  f"over {len(values)}")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()

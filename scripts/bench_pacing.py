"""Benchmark of rate-limit-aware pacing (agent/models/pacing.py): a sweep of jobs calling one model through the
real model layer (the OpenAI SDK, the retry policy, the pacer) against a local server that enforces a
tokens-per-minute limit as a token bucket and answers 429 (with retry-after and x-ratelimit-* headers) beyond
it. Run paced (``tokens-per-minute`` set to the limit) and unpaced (no limit: 429s and retries), side by side:

    python scripts/bench_pacing.py [--jobs 8] [--calls 30] [--limit 60000] [--minute 6] [--latency 0.05]

The "minute" is scaled down to ``--minute`` seconds (RECODE_RATE_MINUTE_SEC for the pacer) so the default run
takes about a minute. Throughput is the tokens the server accepted over the most it could accept between the first
and the last call it admitted (its full bucket at the start plus its refill; the clients' start-up is left out):
the target is >= 0.90 with no job failed and at most 1 %
of calls answered 429. Prints the measurements; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.models.build import build_model  # noqa: E402
from agent.models.pacing import MINUTE_ENV, TokenBucket  # noqa: E402
from agent.common.text_table import fixed_width  # noqa: E402
from tests.fake_providers import (  # noqa: E402
    FakeProvider, FakeUsage, ReceivedRequest, Reply, error_body, model_spec, openai_completion,
)

CHARS_PER_TOKEN = 4


class LimitedServer:
    """The limit as a provider keeps it: a bucket of ``limit`` tokens refilled over ``minute`` seconds; a call
    counts its prompt and its answer when it is admitted."""

    def __init__(self, limit: int, minute: float, latency: float, seed: int) -> None:
        self.bucket = TokenBucket(limit, limit / minute, time.monotonic())
        self.latency, self.random = latency, random.Random(seed)
        self.lock = threading.Lock()
        self.accepted_tokens = self.accepted = self.refused = 0
        self.first = self.last = 0.0  # when the first and the last call were admitted

    def respond(self, request: ReceivedRequest) -> Reply:
        prompt = sum(len(m["content"]) for m in request.messages) // CHARS_PER_TOKEN
        with self.lock:
            answer = self.random.randint(200, 400)
            now = time.monotonic()
            self.bucket.refill(now)
            if self.bucket.level < prompt + answer:
                self.refused += 1
                wait = (prompt + answer - self.bucket.level) / self.bucket.per_sec
                return Reply(status=429, body=error_body("openai", 429, "Rate limit reached for tokens per min"),
                             headers={"retry-after-ms": str(int(wait * 1000) + 1), **self._headers()})
            self.bucket.level -= prompt + answer
            self.first, self.last = self.first or now, now
            self.accepted += 1
            self.accepted_tokens += prompt + answer
            headers = self._headers()
        time.sleep(self.latency)
        return Reply(body=openai_completion("x" * answer * CHARS_PER_TOKEN, FakeUsage(prompt, answer)), headers=headers)

    def _headers(self) -> dict[str, str]:
        bucket = self.bucket
        reset = (bucket.capacity - bucket.level) / bucket.per_sec
        return {"x-ratelimit-limit-tokens": str(int(bucket.capacity)),
                "x-ratelimit-remaining-tokens": str(max(0, int(bucket.level))),
                "x-ratelimit-reset-tokens": f"{reset:.3f}s"}


@dataclass
class Outcome:
    mode: str
    calls: int
    refused: int
    failed_jobs: int
    tokens: int
    wall_sec: float
    ratio: float


def sweep(paced: bool, args: argparse.Namespace) -> Outcome:
    """``args.jobs`` jobs of ``args.calls`` calls each, at once, against a fresh limited server."""
    server = LimitedServer(args.limit, args.minute, args.latency, seed=1)
    failed: list[str] = []
    with FakeProvider("openai", server.respond) as fake:
        spec = replace(model_spec(fake), tokens_per_minute=float(args.limit) if paced else None, max_retries=20,
                       prompt_caching=False)

        def job(index: int) -> None:
            model, sizes = build_model(spec), random.Random(index)
            try:
                for call in range(args.calls):
                    text = f"job {index} call {call}\n" + "p" * sizes.randint(4000, 12000)
                    model.complete([{"role": "user", "content": text}])
            except Exception as error:  # a failed job is a measurement here, not a crash
                failed.append(f"job {index}: {error}")

        started = time.monotonic()
        threads = [threading.Thread(target=job, args=(i,)) for i in range(args.jobs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
    most = args.limit + args.limit / args.minute * (server.last - server.first)
    return Outcome("paced" if paced else "unpaced", server.accepted + server.refused, server.refused, len(failed),
                   server.accepted_tokens, wall, server.accepted_tokens / most)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--calls", type=int, default=30, help="calls per job")
    parser.add_argument("--limit", type=int, default=60000, help="tokens per (scaled) minute")
    parser.add_argument("--minute", type=float, default=6.0, help="seconds in the scaled minute")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per answer")
    args = parser.parse_args()
    os.environ[MINUTE_ENV] = str(args.minute)
    os.environ.setdefault("OPENAI_API_KEY", "bench-key-not-secret")
    rows = []
    for paced in (True, False):
        found = sweep(paced, args)
        rows.append([found.mode, str(found.calls), str(found.refused), f"{100 * found.refused / found.calls:.1f}%",
                     str(found.failed_jobs), f"{found.tokens:,}", f"{found.wall_sec:.1f}", f"{found.ratio:.3f}"])
    print(f"limit {args.limit:,} tokens per {args.minute:g} s minute; {args.jobs} jobs x {args.calls} calls")
    print("\n".join(fixed_width(["mode", "calls", "429s", "429 share", "failed jobs", "tokens accepted", "wall s",
                                 "throughput / limit"], rows)))
    print("target (paced): throughput / limit >= 0.90, no failed job, 429 share <= 1 %")


if __name__ == "__main__":
    main()

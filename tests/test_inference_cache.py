"""The response cache and the replay provider: hits, keys, secrecy, and many writers at once."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.models.build import InferenceError, ModelSpec, build_model
from agent.models.types import ChatRequest
from agent.models.cache import ResponseCache, request_key
from tests.fake_providers import FakeProvider, model_spec, no_provider_env  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("no_provider_env")

REPO = Path(__file__).resolve().parents[1]
ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
SENTINEL = "sk-SENTINEL-c0ffee1234"


def request(content: str, temperature: float | None = None) -> ChatRequest:
    return ChatRequest("m", [{"role": "user", "content": content}], None, temperature, None, None)


def test_hit_returns_stored_text_with_original_tokens_and_no_cost(tmp_path: Path) -> None:
    cache_path = tmp_path / "cache" / "responses.sqlite"
    with FakeProvider("openai") as fake:
        fake.reply_text("4", input_tokens=50, output_tokens=3, cached_tokens=10, reasoning_tokens=1)
        model = build_model(model_spec(fake), cache_path=str(cache_path))
        first = model.complete(ASK)
        second = model.complete(ASK)
        assert len(fake.requests) == 1
    assert second.text == first.text == "4"
    assert first.usage.from_cache is False and first.usage.cost_usd > 0
    assert second.usage.from_cache is True and second.usage.cost_usd == 0.0
    kept = ("provider", "model", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
    assert {k: getattr(second.usage, k) for k in kept} == {k: getattr(first.usage, k) for k in kept}


def test_key_ignores_api_key_and_base_url_but_not_sampling(tmp_path: Path) -> None:
    cache_path = str(tmp_path / "c.sqlite")
    with FakeProvider("openai") as one, FakeProvider("openai") as two:
        one.reply_text("first")
        build_model(model_spec(one, api_key="key-one"), cache_path=cache_path).complete(ASK)
        other = build_model(model_spec(two, api_key="key-two"), cache_path=cache_path)
        assert other.complete(ASK).text == "first"
        assert two.requests == []
        two.reply_text("warmer").reply_text("structured")
        assert build_model(model_spec(two, temperature=0.7), cache_path=cache_path).complete(ASK).text == "warmer"
        assert other.complete(ASK, response_schema={"type": "object"}).text == "structured"
        assert len(two.requests) == 2


def test_request_key_is_canonical() -> None:
    assert request_key(request("a")) == request_key(request("a"))
    assert request_key(request("a")) != request_key(request("b"))
    assert request_key(request("a")) != request_key(request("a", temperature=0.0))


def test_api_key_never_reaches_the_cache_file(tmp_path: Path) -> None:
    cache_path = tmp_path / "c.sqlite"
    with FakeProvider("anthropic") as fake:
        fake.reply_text("stored answer")
        build_model(model_spec(fake, api_key=SENTINEL), cache_path=str(cache_path)).complete(ASK)
    files = list(tmp_path.iterdir())
    assert cache_path in files
    for path in files:
        assert SENTINEL.encode() not in path.read_bytes()
    assert b"stored answer" in b"".join(p.read_bytes() for p in files)


def test_cache_uses_wal_mode(tmp_path: Path) -> None:
    ResponseCache(tmp_path / "c.sqlite")
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


WRITER = """
import sys, time
from agent.models.types import ChatRequest
from agent.models.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
worker = int(sys.argv[2])
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # all writers start together
for i in range(60):
    req = ChatRequest("m", [{"role": "user", "content": f"q{i}-{worker % 2}"}], None, None, None, None)
    cache.put(req, f"answer q{i}-{worker % 2} by {worker}", {"input_tokens": i})
    assert cache.get(req)["text"].startswith(f"answer q{i}-{worker % 2} ")
"""


def test_many_processes_write_one_cache_at_once(tmp_path: Path) -> None:
    cache_path = tmp_path / "shared.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = str(time.time() + 0.5)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(cache_path), str(w), start], env=env, stderr=subprocess.PIPE
        )
        for w in range(4)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err.decode()
    cache = ResponseCache(cache_path)
    for parity in (0, 1):
        for i in range(60):
            stored = cache.get(request(f"q{i}-{parity}"))
            assert stored is not None and stored["usage"] == {"input_tokens": i}
    with sqlite3.connect(cache_path) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 120
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_many_threads_share_one_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(25):
                cache.put(request(f"t{worker}-{i}"), f"a{worker}-{i}", {})
                assert cache.get(request(f"t{worker}-{i}"))["text"] == f"a{worker}-{i}"
        except BaseException as error:  # noqa: BLE001 (reported to the main thread)
            failures.append(error)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_first_answer_wins(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put(request("q"), "first", {})
    cache.put(request("q"), "second", {})
    assert cache.get(request("q"))["text"] == "first"


def test_unusable_cache_is_a_one_line_error(tmp_path: Path) -> None:
    not_a_db = tmp_path / "junk.sqlite"
    not_a_db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InferenceError, match="response cache .* is unusable .*choose another cache-path"):
        build_model(ModelSpec("replay", "m"), cache_path=str(not_a_db))


def test_replay_answers_from_a_recorded_run_and_misses_loudly(tmp_path: Path) -> None:
    cache_path = str(tmp_path / "c.sqlite")
    script = tmp_path / "script.yaml"
    script.write_text('rules:\n  - responses: ["recorded"]\n')
    build_model(ModelSpec("scripted", "gpt-5", script=str(script)), cache_path=cache_path).complete(ASK)

    replay = build_model(ModelSpec("replay", "gpt-5"), cache_path=cache_path)
    completion = replay.complete(ASK)
    assert completion.text == "recorded"
    usage = completion.usage
    assert (usage.provider, usage.from_cache, usage.cost_usd) == ("scripted", True, 0.0)

    other = [{"role": "user", "content": "Something never asked"}]
    miss = r"replay model gpt-5: no cached answer for request \w{12} .*Something never"
    with pytest.raises(InferenceError, match=miss):
        replay.complete(other)
    with pytest.raises(InferenceError, match="no cached answer"):
        build_model(ModelSpec("replay", "gpt-5", temperature=0.5), cache_path=cache_path).complete(ASK)


def test_replay_needs_a_cache_path() -> None:
    with pytest.raises(InferenceError, match="replay model m: set cache-path"):
        build_model(ModelSpec("replay", "m"))

"""Hostile servers and replies against ``giant-run`` (a subprocess) and the reply parser: a degenerate
``<response>`` loop, JSON nested 100,000 deep, usage counts that are not numbers, a trickling server,
and an ``--out`` that cannot be written. Each ends in one line and a bounded time, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from giant_assets.agents import giant
from giant_assets.agents.giant import parse_action, split_answer
from giant_assets.agents.providers import MalformedResponse
from giant_assets.agents.providers.base import SDKChatModel
from giant_assets.agents.providers.factory import model_class
from giant_assets.agents.providers.messages import Message, Usage
from giant_assets.core import jsonscan
from giant_assets.core.jsonscan import json_objects
from giant_assets.demo.scripted import Reply, ScriptedModelServer
from giant_assets.runs.extraction import extract_label
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.agents.test_run_cli import OPTIONS, giant_run
from tests.support.slides import write_pyramidal_slide

TAG, DECODER = giant._TAG, jsonscan._DECODER

DEEP = 100_000


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(
        tmp_path_factory.mktemp("hostile") / "slide.tiff", ONE_LESION_DESIGN, levels=3
    )


def chat_body(content: str | None = "", usage: object = 7, tool_arguments: str | None = None) -> bytes:
    """A Chat Completions reply, built by hand so its fields can be anything a server might send."""
    message: dict = {"role": "assistant", "content": content}
    if tool_arguments is not None:
        function = {"name": "slide_zoom", "arguments": tool_arguments}
        message["tool_calls"] = [{"id": "call_1", "type": "function", "function": function}]
    body = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage, "completion_tokens": usage, "total_tokens": usage},
    }  # fmt: skip
    return json.dumps(body).encode()


def last_two(stdout: str) -> tuple[str, str]:
    """The ``answer:`` and ``label:`` lines giant-run ends with."""
    lines = stdout.strip().splitlines()
    return lines[-2], lines[-1]


def run(slide: Path, server_url: str, *extra: str) -> tuple[int, str, str]:
    result = giant_run(
        str(slide), "--question", "Which?", "--options", *OPTIONS, "--provider", "openai", "--api", "chat",
        "--model", "gpt-5", "--base-url", server_url, *extra,
    )  # fmt: skip
    return result.returncode, result.stdout, result.stderr


@contextmanager
def counted_tag_matches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The number of tag matches the agent's scan steps through (one total, appended on exit)."""
    seen = [0]

    class Counting:
        def finditer(self, text: str):
            for match in TAG.finditer(text):
                seen[0] += 1
                yield match

    total: list[int] = []
    monkeypatch.setattr(giant, "_TAG", Counting())
    yield total
    monkeypatch.setattr(giant, "_TAG", TAG)
    total.append(seen[0])


@contextmanager
def decoded_chars(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """[calls, characters handed to the JSON decoder, characters it read] over the block."""
    tally = [0, 0, 0]

    class Counting:
        def raw_decode(self, chunk: str):
            tally[0] += 1
            tally[1] += len(chunk)
            try:
                obj, n = DECODER.raw_decode(chunk)
            except json.JSONDecodeError as exc:
                tally[2] += exc.pos
                raise
            tally[2] += n
            return obj, n

    monkeypatch.setattr(jsonscan, "_DECODER", Counting())
    yield tally
    monkeypatch.setattr(jsonscan, "_DECODER", DECODER)


def test_tag_scan_gives_what_the_regex_gives_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = re.compile(r"<response>(.*?)</response>", re.DOTALL | re.IGNORECASE)
    pieces = ["<response>", "</response>", "<RESPONSE>", "</Response>", "<report>", "</report>", "a", " 3 "]
    rng = random.Random(7)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        found = oracle.findall(text)
        expected = (found[-1].strip(), True) if found else (text.strip(), False)
        response, _, tagged = split_answer(text)
        assert (response, tagged) == expected, text
    # a degenerate model loop: the old regex took 2.3 s on 80 KB and minutes on 1 MB (timed in
    # perf/bench_hostile.py); the scan visits each tag once per kind it looks for, whatever the text
    for text in ("<response>" * 100_000, "<report>" * 100_000 + "<response>2</response>"):
        with counted_tag_matches(monkeypatch) as matches:
            response, _, tagged = split_answer(text)
        assert matches == [2 * len(giant._TAG.findall(text))]
    assert (response, tagged) == ("2", True)


def naive_json_objects(text: str) -> list[dict]:
    """The plain definition (every "{" tried, left to right): the oracle for ordinary replies."""
    decoder, found, i = json.JSONDecoder(), [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def test_json_scan_finds_what_the_plain_scan_finds_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = ['{"action": "crop", "x": 1, "y": 2, "w": 3, "h": 4}', '{"answer": "2"}', "{ oops }", "{", "}",
              '{"a": {"b": [1, {"c": 2}]}}', '"', " prose ", "\n```json\n", '{"long": "' + "z" * 5000 + '"}',
              "[1, 2]", '{"x": "}{"}']  # fmt: skip
    rng = random.Random(11)
    for _ in range(1500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert json_objects(text) == naive_json_objects(text), text[:300]
    # degenerate replies: the plain scan is quadratic on these (JSONDecodeError counts lines per try,
    # timed in perf/bench_hostile.py): the decoder sees only the last 64 KiB, a window of it per
    # try (a cut-short value once more, to the end), and reads at most the scan's budget in all
    for text in ("{" * 1_000_000, '{"' * 300_000, '{"a":' * 200_000, '{"a": "' * 100_000):
        with decoded_chars(monkeypatch) as tally:
            assert json_objects(text) == []
        calls, handed, read = tally
        assert calls > 0 or text[1] == "{"  # the "{{{" reply has no place where an object may start
        assert calls <= 2 * jsonscan.MAX_PARSED_CHARS, text[:20]
        assert handed <= calls * jsonscan._WINDOW + jsonscan.DECODE_BUDGET + jsonscan.MAX_PARSED_CHARS
        assert read <= jsonscan.DECODE_BUDGET + jsonscan.MAX_PARSED_CHARS


def test_an_integer_python_refuses_makes_no_object_never_a_value_error() -> None:
    """json refuses integers of more than 4300 digits with a ValueError (not a JSONDecodeError)."""
    for digits in (4400, 5000, 50_000):  # 50,000: still within the last 64 KiB a reply is searched in
        huge = "9" * digits
        assert json_objects(f'{{"answer": {huge}}} then {{"answer": 2}}') == [{"answer": 2}]
        action = parse_action(f'{{"action": "crop", "x": 1}} or {{"action": "crop", "x": {huge}}}')
        assert action is not None and action.kind == "crop"
        got = extract_label(
            f'{{"isup_grade": 3}} then {{"isup_grade": {huge}}}', benchmark_name="panda", options=None
        )
        assert got.label == 3


@pytest.mark.parametrize("depth", [990, 995, 1000, 1500, DEEP])
def test_deeply_nested_json_in_a_reply_is_no_action_never_a_recursion_error(depth: int) -> None:
    nested = '{"a": ' * depth + "1" + "}" * depth
    action = parse_action(f'{{"answer": {nested}}} and then {{"action": "crop", "x": 1}}')
    assert action is not None and action.kind == "crop"  # the deep object is skipped, the next one read
    assert parse_action(nested) is None or depth < 995


def test_a_megabyte_of_response_tags_is_answered_in_seconds(slide: Path) -> None:
    loop = "<response>" * 100_000  # 1 MB, no closing tag: GIANT's final answer, read for its tags
    with ScriptedModelServer([Reply(body=chat_body(loop))]) as server:
        # the old scan held the event loop for minutes, so not even the deadline could fire: the run
        # then outlives giant_run's timeout and fails the test (the scan's work is counted above)
        code, out, err = run(slide, server.openai_base_url, "--deadline", "20")
    assert "Traceback" not in err and code == 0 and len(server.requests) == 1, err
    assert last_two(out)[1] == "label: none"


def test_json_nested_100000_deep_in_tool_arguments_and_reply(slide: Path, tmp_path: Path) -> None:
    deep = '{"a":' * DEEP + "1" + "}" * DEEP
    script = [
        Reply(body=chat_body(None, tool_arguments=deep)),
        Reply(body=chat_body(deep + ' {"answer": 2}')),
    ]
    out = tmp_path / "deep.json"
    with ScriptedModelServer(script) as server:
        code, stdout, stderr = run(slide, server.openai_base_url, "--out", str(out))
    assert "Traceback" not in stderr and "RecursionError" not in stdout + stderr
    assert code == 0 and len(server.requests) == 2, stdout + stderr
    doc = json.loads(out.read_text())
    assert doc["steps"][1]["error"].startswith("unusable tool call slide_zoom(")  # served as unusable
    assert doc["label"] == 2 and last_two(stdout) == (
        "answer: " + " ".join(doc["answer"].split()),
        "label: 2",
    )


def wire_body(wire: str, usage: object) -> bytes:
    if wire == "chat":
        return chat_body('{"answer": 3}', usage=usage)
    if wire == "responses":
        text = {"type": "output_text", "text": '{"answer": 3}', "annotations": []}
        body = {
            "id": "r", "object": "response", "created_at": 1, "model": "m", "status": "completed",
            "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
                        "content": [text]}],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": usage, "output_tokens": usage, "total_tokens": usage},
        }  # fmt: skip
    else:
        body = {
            "id": "x", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": '{"answer": 3}'}],
            "usage": {"input_tokens": usage, "output_tokens": usage, "cache_read_input_tokens": usage},
        }  # fmt: skip
    return json.dumps(body).encode()


@pytest.mark.parametrize("wire", ["chat", "responses", "messages"])
def test_usage_counts_that_are_not_numbers(wire: str) -> None:
    with ScriptedModelServer([Reply(body=wire_body(wire, u)) for u in (None, "many")]) as server:
        url = server.base_url if wire == "messages" else server.openai_base_url
        asyncio.run(ask_twice(model_class(wire)("m", base_url=url)))


async def ask_twice(model: SDKChatModel) -> None:
    """The first reply has null counts, the second "many"."""
    try:
        reply = await model.complete([Message.user("hi")])  # null counts: 0 tokens, the text stands
        assert reply.text == '{"answer": 3}' and reply.usage == Usage()
        with pytest.raises(MalformedResponse, match=r"usage \w+ is 'many', not a token count"):
            await model.complete([Message.user("hi")])  # no TypeError: a malformed reply
    finally:
        await model.aclose()


def test_out_directory_is_refused_before_any_call(slide: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    from tests.agents.test_run_cli import giant_run_in_process  # a refusal before any call: in-process

    with ScriptedModelServer([Reply(body=chat_body('{"answer": 3}'))] * 2) as server:
        code, stderr = giant_run_in_process(
            monkeypatch, capsys, str(slide), "--question", "Which?", "--options", *OPTIONS,
            "--provider", "openai", "--api", "chat", "--model", "gpt-5", "--base-url", server.openai_base_url,
            "--mode", "thumbnail", "--out", str(tmp_path),
        )  # fmt: skip
    assert code == 2 and server.requests == []
    assert f"--out {tmp_path} is a directory" in stderr and "Traceback" not in stderr


def test_answer_is_printed_when_out_cannot_be_written(slide: Path) -> None:
    # /dev/full: every write fails with ENOSPC, as on a full disk, after the (paid) call
    with ScriptedModelServer([Reply(body=chat_body('{"answer": 3}'))]) as server:
        code, stdout, stderr = run(slide, server.openai_base_url, "--mode", "thumbnail", "--out", "/dev/full")
    assert code == 1 and len(server.requests) == 1 and "Traceback" not in stderr
    assert "error: --out /dev/full: cannot be written (No space left on device)" in stdout
    assert last_two(stdout) == ('answer: {"answer": 3}', "label: 3")


@pytest.fixture
def trickle_server() -> Iterator[str]:
    """A server that sends response headers, then one byte of body every 0.5 s, forever."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                )
                while not stop.wait(0.5):
                    try:
                        conn.sendall(b" ")
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    listener.close()


def test_trickling_server_is_cut_at_the_run_deadline(slide: Path, trickle_server: str) -> None:
    # without a deadline it never ends: giant_run's timeout would then fail the test
    code, stdout, stderr = run(slide, trickle_server, "--mode", "thumbnail", "--deadline", "2")
    assert code == 1 and "Traceback" not in stderr, stderr
    assert "failed: timeout: no answer within --deadline 2s" in stdout


def test_a_local_servers_text_tool_calls_are_read_in_bounded_time() -> None:
    """A local model writing tool calls in its text goes through the same bounded scan (its own plain
    scan took minutes on a megabyte of braces)."""

    from giant_assets.agents.providers.local import text_tool_calls

    started = time.process_time()
    assert text_tool_calls("{" * 1_000_000, {"slide_zoom"}) == ()
    # a <tool_call> block too deep to read is one unusable call (reported), not silently no call
    (deep,) = text_tool_calls("<tool_call>" + '{"a":' * 200_000, {"slide_zoom"})
    assert deep.name == "(unnamed)" and deep.arguments is None
    assert time.process_time() - started < 20
    (call,) = text_tool_calls('ok {"name": "slide_zoom", "arguments": {"x0": 1}}', {"slide_zoom"})
    assert call.name == "slide_zoom" and call.arguments == {"x0": 1}

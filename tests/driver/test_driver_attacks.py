"""A permanent Hypothesis campaign of hostile driver messages, over stdio and over HTTP.

Wrong types, missing fields, huge and deeply nested values, lone surrogates, unknown ops,
ids of every kind, garbage bytes. For every non-blank line: exactly one reply, a valid
envelope whose id is the request's (or null when the request has no readable id), a typed error code
(never `internal_error`) when refused, the process alive, and, after a refusal, every byte
of the state directory as it was (a refused operation writes nothing).
`JFSM_ATTACK_EXAMPLES` sets the number of examples (default 100 over stdio, half over HTTP).
"""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jfsm.driver import ReferenceDriver
from jfsm.limits import depth
from jfsm.spec import constants, load_json
from jfsm.stores.file.manifest import MANIFEST_TMP, log_name
from jfsm.testing import FakeCompressor
from tests.driver_helpers import HELLO, WAIT, HttpDriver, StdioDriver, tree_hashes

OPS = [op["name"] for op in load_json("driver/protocol.json")["ops"]]
HOSTILE_OPS = [op for op in OPS if op not in {"hello", "shutdown"}]
ARG_NAMES = [
    "game",
    "into",
    "scene",
    "input",
    "output",
    "user",
    "assistant",
    "revealed",
    "round",
    "rounds",
    "participants",
    "sets",
    "deletes",
    "closingSummary",
    "meanwhileEvent",
    "protocol",
    "compressUrl",
]
CODES = set(load_json("constants.json")["error_codes"]) | {"unsupported_op"}


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A compress.v2 that refuses at once (400, never retried): compressions end fast."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": {"code": "bad_request", "message": "no"}}'
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def compress_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# -- hostile lines ------------------------------------------------------------------------
text = st.text(st.characters(exclude_categories=()), max_size=20)  # lone surrogates included
ids = st.sampled_from(["g", "h", "nope", "", "a b", "x" * 200, "\ud800"]) | text
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
    | ids
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text | ids, inner, max_size=3),
    max_leaves=12,
)
args = st.dictionaries(st.sampled_from(ARG_NAMES) | text, values, max_size=5)
msg_ids = st.integers(0, 2**40) | st.sampled_from([-1, True, None, "7", 1.5, [], {}, 2**80])
ops = st.sampled_from(HOSTILE_OPS) | text


def _dump(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=True).encode("ascii")


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind <= 4:  # an envelope with hostile parts, sometimes missing some
        message: dict[str, Any] = {"id": draw(msg_ids), "op": draw(ops), "args": draw(args)}
        for key in draw(st.sets(st.sampled_from(["id", "op", "args"]), max_size=1)):
            del message[key]
        return _dump(message)
    if kind == 5:  # nesting past the limit, in a value or as the whole message
        # far from the depth where CPython's own parser gives up (about 1000), so that the
        # test's parse and the driver's agree on whether the id can be read
        depth = draw(st.integers(60, 600) | st.integers(2000, 3000))
        inner = b"[" * depth + b"]" * depth
        if draw(st.booleans()):
            return inner
        return b'{"id": 5, "op": "write", "args": {"game": "g", "sets": {"k": ' + inner + b"}}}"
    if kind == 6:  # a huge value
        size = draw(st.integers(100_000, 600_000))
        op = draw(st.sampled_from(["record_round", "write", "create_game"]))
        return _dump({"id": 6, "op": op, "args": {"game": "g", "input": "x" * size, "output": "o"}})
    if kind == 7:  # JSON, but not a message
        return _dump(draw(values))
    if kind == 8:  # non-standard JSON tokens and raw surrogate escapes
        return draw(
            st.sampled_from(
                [
                    b'{"id": NaN, "op": "dump", "args": {"game": "g"}}',
                    b'{"id": 1, "op": "write", "args": {"game": "g", "sets": {"k": Infinity}}}',
                    b'{"id": "\\udc00", "op": "\\ud800", "args": {}}',
                    b'{"id": 2, "op": "create_game", "args": {"game": "\\ud800"}}',
                    b'{"id": 3, "op": "write", "args": {"game": "g", "sets": {"\\ud800": 1}}}',
                ]
            )
        )
    garbage = draw(st.binary(min_size=1, max_size=300)).replace(b"\n", b" ")
    return garbage if garbage.strip() else b"?" + garbage  # blank lines are not messages


def _no_nan(name: str) -> Any:
    raise ValueError(name)


def _expected_id(line: bytes) -> int | None:
    """The id the reply must carry: the request's if it can be read, else None."""
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_no_nan)
    except (ValueError, RecursionError):
        return None
    if depth(message, stop=constants().message_max_depth) > constants().message_max_depth:
        return None  # too deep to be read as a message (JF-ERR-008)
    if isinstance(message, dict):
        found = message.get("id")
        if isinstance(found, int) and not isinstance(found, bool) and found >= 0:
            return found
    return None


def _check_reply(line: bytes, reply: Any) -> bool:
    """Assert the reply is a valid answer to `line`; True if it is a refusal."""
    assert isinstance(reply, dict) and set(reply) in ({"id", "ok", "result"}, {"id", "ok", "error"})
    assert reply["id"] == _expected_id(line), (line[:200], reply)
    if reply["ok"] is True:
        return False
    assert reply["ok"] is False
    error = reply["error"]
    assert error["code"] in CODES, (line[:200], error)
    assert isinstance(error["message"], str) and error["message"]
    return True


def _setup(call: Any, url: str) -> None:
    assert call("hello", {"protocol": 1, "compressUrl": url})["ok"]
    assert call("create_game", {"game": "g"})["ok"]
    assert call("record_round", {"game": "g", "input": "i", "output": "o"})["ok"]
    assert call("start_scene", {"game": "g", "scene": "s"})["ok"]


CAMPAIGN = settings(
    max_examples=int(os.environ.get("JFSM_ATTACK_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory, compress_url: str) -> Iterator[StdioDriver]:
    state = tmp_path_factory.mktemp("attack") / "state"
    driver = StdioDriver(state)
    driver.state = state  # type: ignore[attr-defined]
    _setup(driver.call, compress_url)
    yield driver
    driver.close()


@pytest.mark.slow
@pytest.mark.req("JF-ERR-008", "JF-ERR-010", "JF-ERR-002", "JF-ERR-006", "JF-ERR-007")
@CAMPAIGN
@given(line=messages())
def test_hostile_lines_over_stdio(stdio: StdioDriver, line: bytes) -> None:
    state: Path = stdio.state  # type: ignore[attr-defined]
    before = tree_hashes(state), stdio.call("dump", {"game": "g"})["result"]
    stdio.send_raw(line + b"\n")
    reply = stdio.reply(WAIT)
    refused = _check_reply(line, reply)
    assert stdio.alive()
    assert stdio.lines.empty()  # exactly one reply per line
    if refused:
        after = tree_hashes(state), stdio.call("dump", {"game": "g"})["result"]
        assert after == before, (line[:200], reply)


@pytest.fixture(scope="module")
def http_driver(
    tmp_path_factory: pytest.TempPathFactory, compress_url: str
) -> Iterator[HttpDriver]:
    state = tmp_path_factory.mktemp("attack-http") / "state"
    driver = HttpDriver("campaign-token", state=state)
    driver.state = state  # type: ignore[attr-defined]
    _setup(driver.call, compress_url)
    yield driver
    driver.close()


@pytest.mark.slow
@pytest.mark.req("JF-ERR-008", "JF-ERR-010", "JF-ERR-012", "JF-ERR-002")
@settings(CAMPAIGN, max_examples=max(1, CAMPAIGN.max_examples // 2))
@given(line=messages())
def test_hostile_bodies_over_http(http_driver: HttpDriver, line: bytes) -> None:
    state: Path = http_driver.state  # type: ignore[attr-defined]
    before = tree_hashes(state), http_driver.call("dump", {"game": "g"})["result"]
    response = http_driver.client.post(
        http_driver.url + "/v1/message", content=line, headers=http_driver.headers()
    )
    reply = response.json()
    refused = _check_reply(line, reply)
    assert response.status_code == (400 if reply["id"] is None else 200)
    assert http_driver.alive()
    if refused:
        after = tree_hashes(state), http_driver.call("dump", {"game": "g"})["result"]
        assert after == before, (line[:200], reply)


# -- planted links in the state directory (JF-ERR-016) ------------------------------------
# A neighbour who could write into the state directory plants a link under a name the
# driver writes, aimed at a file of their choice. The driver must never write through it.
THRESHOLDS_HELLO = {**HELLO, "thresholds": {"game": 10}}
ROUND = {"input": "hello there " * 3, "output": "general kenobi " * 3}


def _outside(root: Path) -> dict[str, str]:
    """Every entry under `root` (files hashed, links and folders named): what a planted link
    could have written or created."""
    out = {}
    for path in sorted(root.rglob("*")):
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        data = path.read_bytes() if kind == "file" else b""
        out[str(path.relative_to(root))] = kind + ":" + hashlib.sha256(data).hexdigest()
    return out


async def _ok(driver: ReferenceDriver, op: str, args: dict[str, Any]) -> Any:
    reply = await driver.handle({"id": 1, "op": op, "args": args})
    assert reply["ok"], (op, reply)
    return reply["result"]


def _fake_driver(state: Path) -> ReferenceDriver:
    return ReferenceDriver(state, compressor_factory=lambda url: FakeCompressor())


async def _game_with_rounds(state: Path) -> ReferenceDriver:
    driver = _fake_driver(state)
    await _ok(driver, "hello", THRESHOLDS_HELLO)
    await _ok(driver, "create_game", {"game": "g"})
    await _ok(driver, "record_round", {"game": "g", **ROUND})
    return driver


def _plant(link: Path, target: Path) -> None:
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(target)


@pytest.mark.req("JF-ERR-016")
@pytest.mark.parametrize(
    "name",
    [
        "telemetry.jsonl",
        "participants.json",
        f"store/{log_name(1)}",  # the next checkpoint's log
        "store/snapshot.00000001.tmp",  # would receive the game's text
        f"store/{MANIFEST_TMP}",
    ],
)
def test_a_planted_file_link_is_never_written_through(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each link aims at an existing file outside (which the old driver overwrote) and the
    operation that writes the name runs; it succeeds, and nothing outside changes."""
    state, outside = tmp_path / "state", tmp_path / "outside"
    outside.mkdir()
    (outside / "target").write_bytes(b"the neighbour's file\n")

    async def attack() -> None:
        driver = await _game_with_rounds(state)
        folder = driver.state.folder("g")  # type: ignore[union-attr]
        _plant(folder.path / name, outside / "target")
        before = _outside(outside)
        if name == "telemetry.jsonl":
            report = await _ok(driver, "generate", {"game": "g"})
            assert report["outcome"] == "published"  # the compression is still published
            await _ok(driver, "record_round", {"game": "g", **ROUND})
            await _ok(driver, "record_round", {"game": "g", **ROUND})
            assert (await _ok(driver, "generate", {"game": "g"}))["outcome"] == "published"
            assert _outside(outside) == before
            await driver.games["g"].telemetry_written()  # written off the loop (R151)
            assert driver.games["g"].status()["telemetryFailures"] == 2
        elif name == "participants.json":
            people = [{"id": "p", "human": True, "spectator": False}]
            await _ok(driver, "set_participants", {"game": "g", "participants": people})
        else:
            await _ok(driver, "checkpoint", {"game": "g"})
            await _ok(driver, "record_round", {"game": "g", **ROUND})
        assert _outside(outside) == before
        await driver.close()
        again = _fake_driver(state)  # and the game reopens whole
        assert (await _ok(again, "hello", HELLO))["skipped"] == []
        assert len((await _ok(again, "dump", {"game": "g"}))["store"]) > 0
        await again.close()
        assert _outside(outside) == before

    asyncio.run(attack())
    if name == "telemetry.jsonl":  # one stderr line for two failures
        lines = [line for line in capsys.readouterr().err.splitlines() if "telemetry" in line]
        assert len(lines) == 1 and "ELOOP" in lines[0], lines


@pytest.mark.req("JF-ERR-016", "JF-ERR-014")
@pytest.mark.parametrize("name", ["store", "store/lock", "."])
def test_a_planted_folder_or_lock_link_is_skipped_never_followed(tmp_path: Path, name: str) -> None:
    """`store` linked to another folder (the old driver served the game from there), the
    store's `lock` linked to a missing file outside (the old driver created it), the game's
    folder itself linked: the restarted driver skips the game and writes nothing outside."""
    state, outside = tmp_path / "state", tmp_path / "outside"
    outside.mkdir()

    async def attack() -> None:
        driver = await _game_with_rounds(state)
        folder = driver.state.folder("g")  # type: ignore[union-attr]
        await driver.close()
        if name == "store":
            shutil.copytree(folder.store, outside / "store")
            _plant(folder.store, outside / "store")
        elif name == "store/lock":
            _plant(folder.store / "lock", outside / "created-through-the-link")
        else:
            shutil.copytree(folder.path, outside / "game")
            _plant(folder.path, outside / "game")
        before = _outside(outside)
        again = _fake_driver(state)
        hello = await _ok(again, "hello", HELLO)
        assert [s["entry"] for s in hello["skipped"]] == [folder.path.name], hello
        reply = await again.handle({"id": 2, "op": "record_round", "args": {"game": "g", **ROUND}})
        assert not reply["ok"]
        reply = await again.handle({"id": 3, "op": "create_game", "args": {"game": "g"}})
        assert not reply["ok"]
        await again.close()
        assert _outside(outside) == before

    asyncio.run(attack())


def _refused_state(argv: list[str], state: Path) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "driver", *argv],
        input=b'{"id": 1, "op": "hello", "args": {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}}\n',
        capture_output=True,
        timeout=WAIT,
    )
    err = run.stderr.decode()
    assert run.returncode == 2 and run.stdout == b"", (run.returncode, run.stdout, err)
    assert len(err.strip().splitlines()) == 1 and str(state) in err, err
    return err


@pytest.mark.slow
@pytest.mark.req("JF-ERR-016")
def test_a_state_directory_not_ours_is_refused_in_one_line(tmp_path: Path) -> None:
    """A --state folder made beforehand by a neighbour: mode 0777, another user's, or a
    link. The old driver used it without a check."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert "writable by group or others" in _refused_state(["--state", str(shared)], shared)
    assert list(shared.iterdir()) == []
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    assert "symbolic link" in _refused_state(["--state", str(link)], link)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    if os.geteuid() == 0:  # root can make a folder of another user; others cannot
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, 65534, 65534)
        assert "another user" in _refused_state(["--state", str(theirs)], theirs)
        assert list(theirs.iterdir()) == []
    # trusted knowingly: served
    run = subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "driver", "--state", str(shared), "--trust-state"],
        input=b'{"id": 1, "op": "hello", "args": {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}}\n',
        capture_output=True,
        timeout=WAIT,
    )
    assert run.returncode == 0 and json.loads(run.stdout)["ok"], run.stderr


# -- request heads: the header limit by bytes, hosts by exact parse (JF-ERR-011/012) --------
HEADER_BYTES = load_json("driver/protocol.json")["http"]["limits"]["header_bytes"]["value"]


def _head(host: str, pad: int) -> bytes:
    body = b'{"id": 1, "op": "dump", "args": {"game": "g"}}'
    head = (
        f"POST /v1/message HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer campaign-token\r\nContent-Length: {len(body)}\r\n"
    ).encode()
    head += b"X-Pad: " + b"a" * pad + b"\r\n\r\n" if pad else b"\r\n"
    return head + body


def _send_in_pieces(port: int, data: bytes, cuts: list[int]) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = 0
        for cut in [*sorted(set(cuts)), len(data)]:
            sock.sendall(data[start:cut])
            start = cut
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = sock.recv(65536)
            if not chunk:
                break
            response += chunk
    return response


@pytest.mark.req("JF-ERR-012")
@settings(CAMPAIGN, max_examples=max(1, CAMPAIGN.max_examples // 4))
@given(
    size=st.integers(HEADER_BYTES - 64, HEADER_BYTES + 64) | st.integers(0, 3 * HEADER_BYTES),
    cuts=st.lists(st.integers(0, 4 * HEADER_BYTES), max_size=4),
)
def test_the_header_limit_holds_whatever_the_reads(
    http_driver: HttpDriver, size: int, cuts: list[int]
) -> None:
    """A head of `size` bytes sent whole or in pieces: 431 exactly when it exceeds the limit
    (the old driver answered a 40 KiB head 200 when one read took it whole)."""
    base = len(_head("127.0.0.1", 0).split(b"\r\n\r\n")[0]) + 2 + len(b"X-Pad: \r\n\r\n")
    data = _head("127.0.0.1", max(1, size - base))
    head_size = data.index(b"\r\n\r\n") + 4
    response = _send_in_pieces(http_driver.port, data, [c for c in cuts if c < len(data)])
    expected = b"431" if head_size > HEADER_BYTES else b"200"
    assert response.split(b" ", 2)[1] == expected, (head_size, response[:200])
    assert http_driver.alive()


@pytest.mark.req("JF-ERR-011")
@settings(CAMPAIGN, max_examples=max(1, CAMPAIGN.max_examples // 4))
@given(
    name=st.sampled_from(["127.0.0.1", "localhost", "LocalHost", "[::1]"]),
    port=st.none() | st.integers(0, 99999).map(str),
    junk=st.text(alphabet="@.:[]/%evil.example0123456789-", max_size=14),
)
def test_hosts_are_parsed_exactly(
    http_driver: HttpDriver, name: str, port: str | None, junk: str
) -> None:
    """A loopback name, an optional port and anything after them: served only when nothing
    follows (`127.0.0.1:80@evil.example` and `[::1]evil.example` were served before)."""
    after = ("" if port is None else ":" + port) + junk  # what follows the name
    exact = after == "" or (after[:1] == ":" and after[1:].isdigit() and len(after) <= 6)
    host = name + after
    response = _send_in_pieces(http_driver.port, _head(host, 0), [])
    assert response.split(b" ", 2)[1] == (b"200" if exact else b"421"), (host, response[:200])

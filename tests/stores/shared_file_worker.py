"""A process that owns one game of a shared directory, for `test_file_lease.py` and
`test_file_epochs.py`.

`python shared_file_worker.py ROOT GAME OWNER [LEASE_SECONDS]` reads one command a line on
stdin and answers one JSON line each on stdout:

- `open` / `takeover`: `{"ok": true, "token": N}` or `{"ok": false, "code": ...}`;
- `commit KEY`: commit `{KEY: KEY}`; `{"ok": true}` or the error's code;
- `commits N`: commit keys `n0` ... `n{N-1}` one after the other, answering
  `{"ack": i}` after each (what a kill may interrupt);
- `checkpoint`, `side NAME VALUE` (a side value, JSON): `{"ok": true}` or the error's code;
- `arm POINT`: `{"ok": true}`; the next command that passes the named point of
  `jfsm.stores.file.ownership` (`write:appended`, `take:sealed`...) stops this process
  there with `SIGSTOP` (a frozen owner), and answers once it is continued;
- `keys`: `{"keys": [...]}`, the store's keys as this handle sees them; `sides`:
  `{"sides": {...}}`;
- `close`: close the store, `{"ok": true}`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from jfsm.errors import JfsmError
from jfsm.projection import Projection
from jfsm.stores.file.store import FileStore

armed: list[str] = []  # the point to stop at, once


def step(point: str) -> None:
    """The store's seam: stop this process (`SIGSTOP` to itself) at the armed point."""
    if armed and armed[0] == point:
        armed.clear()
        os.kill(os.getpid(), signal.SIGSTOP)


def main() -> None:
    root, game, owner = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
    folder = root / game
    folder.mkdir(parents=True, exist_ok=True)
    store: FileStore | None = None

    def say(answer: dict[str, object]) -> None:
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        words = line.split()
        try:
            if words[0] in ("open", "takeover"):
                store = FileStore.open_shared(
                    folder / "store",
                    game=game,
                    lease_folder=folder,
                    root=root,
                    owner=owner,
                    takeover=words[0] == "takeover",
                    lease_seconds=seconds,
                    step=step,
                )
                say({"ok": True, "token": store.token})
            elif words[0] == "arm":
                armed[:] = [words[1]]
                say({"ok": True})
            elif words[0] == "commit":
                assert store is not None
                store.commit_sync(Projection.of({words[1]: words[1]}))
                say({"ok": True})
            elif words[0] == "checkpoint":
                assert store is not None
                store.checkpoint_sync()
                say({"ok": True})
            elif words[0] == "side":
                assert store is not None
                store.write_side_sync(words[1], words[2].encode())
                say({"ok": True})
            elif words[0] == "commits":
                assert store is not None
                for i in range(int(words[1])):
                    store.commit_sync(Projection.of({f"n{i}": i}))
                    say({"ack": i})
            elif words[0] == "keys":
                assert store is not None
                say({"keys": sorted(store.image.keys())})
            elif words[0] == "sides":
                assert store is not None and store.fence is not None
                say({"sides": {k: v.decode() for k, v in store.fence.sides.items()}})
            elif words[0] == "close":
                assert store is not None
                store.close_sync()
                say({"ok": True})
        except JfsmError as exc:
            say({"ok": False, "code": exc.code})


if __name__ == "__main__":
    main()

"""A process that owns one game of a shared directory, for `test_file_lease.py`.

`python shared_file_worker.py ROOT GAME OWNER [LEASE_SECONDS]` reads one command a line on
stdin and answers one JSON line each on stdout:

- `open` / `takeover`: `{"ok": true, "token": N}` or `{"ok": false, "code": ...}`;
- `commit KEY`: commit `{KEY: KEY}`; `{"ok": true}` or the error's code;
- `commits N`: commit keys `n0` ... `n{N-1}` one after the other, answering
  `{"ack": i}` after each (what a kill may interrupt);
- `freeze KEY`: commit `{KEY: KEY}`, but stop this process with `SIGSTOP` once the record
  is written and before it is synced, holding the game's lock (a frozen owner mid-write);
- `keys`: `{"keys": [...]}`, the store's keys as this handle sees them;
- `close`: close the store, `{"ok": true}`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from jfsm.errors import JfsmError
from jfsm.projection import Projection
from jfsm.stores.file.store import FileStore


def _stopping(sync: Callable[[int], None]) -> Callable[[int], None]:
    """`sync`, after this process stops itself with `SIGSTOP` (a frozen owner)."""

    def frozen(handle: int) -> None:
        os.kill(os.getpid(), signal.SIGSTOP)
        sync(handle)

    return frozen


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
                )
                say({"ok": True, "token": store.token})
            elif words[0] == "commit":
                assert store is not None
                store.commit_sync(Projection.of({words[1]: words[1]}))
                say({"ok": True})
            elif words[0] == "freeze":
                assert store is not None
                fs = store._fs
                fs.fdatasync = _stopping(fs.fdatasync)  # type: ignore[method-assign]
                store.commit_sync(Projection.of({words[1]: words[1]}))
                say({"ok": True})
            elif words[0] == "commits":
                assert store is not None
                for i in range(int(words[1])):
                    store.commit_sync(Projection.of({f"n{i}": i}))
                    say({"ack": i})
            elif words[0] == "keys":
                assert store is not None
                say({"keys": sorted(store.image.keys())})
            elif words[0] == "close":
                assert store is not None
                store.close_sync()
                say({"ok": True})
        except JfsmError as exc:
            say({"ok": False, "code": exc.code})


if __name__ == "__main__":
    main()

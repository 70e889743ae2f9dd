"""A broken durable stdio driver (for `tests/suite/test_hostile.py`): it keeps each game in a
JSON file of its state directory, opened with plain `open()`, and trusts whatever it finds
there. It starts on a state directory that is a symbolic link or open to everyone, and it
writes through symbolic links planted among its files: JF-ERR-016.

```
python -m jfsm_conformance.examples.trusting_state STATE_DIR
```

It answers only what the scenario `hostile-state` sends (`hello`, `create_game`,
`record_round`, `dump`); any other op gets `unsupported_op`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

__all__ = ["main"]


def _answer(state: str, op: str, args: dict[str, Any]) -> Any:
    games = os.path.join(state, "games")
    path = os.path.join(games, f"{args.get('game', '')}.json")
    if op == "hello":
        return {
            "protocol": 1,
            "implementation": {"name": "trusting-state", "version": "0", "language": "python"},
            "capabilities": {
                "durableRestart": True,
                "concurrent": False,
                "thresholdOverride": False,
            },
        }
    if op == "create_game":
        os.makedirs(games, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:  # follows a planted link
            json.dump({"rounds": []}, f)
        return {}
    if op in ("record_round", "dump"):
        with open(path, encoding="utf-8") as f:
            game = json.load(f)
        if op == "dump":
            return {"store": game, "changeLog": [], "footprint": 0}
        game["rounds"].append([args.get("input"), args.get("output")])
        with open(path, "w", encoding="utf-8") as f:  # follows a planted link
            json.dump(game, f)
        return {"round": len(game["rounds"]), "seq": len(game["rounds"])}
    raise LookupError(op)


def main(argv: list[str]) -> int:
    state = argv[0]
    os.makedirs(state, exist_ok=True)
    for line in sys.stdin:
        message = json.loads(line)
        try:
            reply = {
                "id": message["id"],
                "ok": True,
                "result": _answer(state, message["op"], message.get("args", {})),
            }
        except LookupError:
            reply = {
                "id": message["id"],
                "ok": False,
                "error": {"code": "unsupported_op", "message": message["op"]},
            }
        except OSError as exc:
            reply = {
                "id": message["id"],
                "ok": False,
                "error": {"code": "internal_error", "message": str(exc)},
            }
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

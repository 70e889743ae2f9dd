"""Deterministic rebuild of the game stack from canonical rounds and archives (D15).

Reset, retrospective edit and simple-to-live conversion never compress: they replace the
game stack with one exact chunk per surviving canonical round, each followed by the outcomes
of the scenes published after it (in publication order). The rebuilt stack has no summary,
numbers its chunks from 1, advances the epoch (so a compression in flight ends stale), and
sets the forced-compression flag iff a surviving round was intervened. The same rounds and
archives always give the same projection, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from jfsm.layout import ARCHIVES, GAME
from jfsm.memory_index import StackState
from jfsm.records import ArchiveRecord, Chunk, Round, StackMeta

__all__ = ["rebuild_game_stack"]


def rebuild_game_stack(
    rounds: Sequence[Round],
    archives: Mapping[str, ArchiveRecord],
    current: StackState,
    *,
    archives_present: bool,
    seeded: bool = False,
) -> tuple[dict[str, Any], set[str]]:
    """Sets and deletes that rebuild the game stack; `archives` are the surviving ones.

    `archives_present` says whether the store holds the archives key now (so that rolling
    every archive back deletes it); `seeded` marks round chunks as origin `seed`
    (simple-to-live conversion).
    """
    by_round: dict[int, list[tuple[str, ArchiveRecord]]] = {}
    for scene_id, record in archives.items():
        if record.state == "published":
            by_round.setdefault(record.after_round, []).append((scene_id, record))
    sets: dict[str, Any] = {}
    new_archives = {scene: record.to_json() for scene, record in archives.items()}
    seq = 0

    def place_outcomes(after: int) -> None:
        nonlocal seq
        for scene_id, record in sorted(by_round.get(after, []), key=lambda item: item[1].order):
            seq += 1
            chunk = Chunk(
                seq=seq,
                user=record.meanwhile_event or "",
                assistant=record.closing_summary or "",
                origin="catalyst",
                catalyst_id=scene_id,
            )
            sets[GAME.chunk(seq)] = chunk.to_json()
            new_archives[scene_id] = record.model_copy(update={"outcome_seq": seq}).to_json()

    place_outcomes(0)
    for r in sorted(rounds, key=lambda r: r.n):
        seq += 1
        origin: Literal["intervene", "seed", "round"] = (
            "intervene" if r.intervened else ("seed" if seeded else "round")
        )
        chunk = Chunk(seq=seq, user=r.input, assistant=r.output, origin=origin, round_id=r.n)
        sets[GAME.chunk(seq)] = chunk.to_json()
        place_outcomes(r.n)
    old = current.stack_meta()
    meta = StackMeta(
        next_seq=seq + 1,
        epoch=old.epoch + 1,
        forced_compression=any(r.intervened for r in rounds),
    )
    sets[GAME.meta] = meta.to_json()
    deletes = {key for key in current.all_keys() if key not in sets}
    if new_archives:
        sets[ARCHIVES] = new_archives
    elif archives_present:
        deletes.add(ARCHIVES)
    return sets, deletes

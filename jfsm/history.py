"""Deterministic rebuild of the game stack from canonical rounds and archives (D15).

Reset, retrospective edit and simple-to-live conversion never compress: they replace the
game stack with one exact chunk per surviving canonical round, each followed by the outcomes
of the scenes published after it (in publication order). The rebuilt stack has no summary,
numbers its chunks from 1, advances the epoch (so a compression in flight ends stale), and
writes the forced-compression flag it is given (the game's forced-compression machine sets
it iff a surviving round was intervened). The same rounds and archives always give the same
projection, byte for byte. The plan is records (decision R34), encoded once when committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from jfsm.layout import ARCHIVES, GAME
from jfsm.memory_index import StackState
from jfsm.records import ArchiveRecord, Chunk, Record, Round, StackMeta

__all__ = ["RebuildPlan", "rebuild_game_stack"]

#: Sets (key -> record; `ARCHIVES` -> scene id -> record) and deletes of a rebuild.
RebuildPlan = tuple[dict[str, Record | Mapping[str, ArchiveRecord]], set[str]]


def rebuild_game_stack(
    rounds: Sequence[Round],
    archives: Mapping[str, ArchiveRecord],
    current: StackState,
    *,
    archives_present: bool,
    seeded: bool = False,
    forced: bool,
) -> RebuildPlan:
    """Sets and deletes that rebuild the game stack; `archives` are the surviving ones.

    `archives_present` says whether the store holds the archives key now (so that rolling
    every archive back deletes it); `seeded` marks round chunks as origin `seed`
    (simple-to-live conversion); `forced` is the forced-compression flag the meta gets.
    """
    by_round: dict[int, list[tuple[str, ArchiveRecord]]] = {}
    for scene_id, record in archives.items():
        if record.state == "published":
            by_round.setdefault(record.after_round, []).append((scene_id, record))
    sets: dict[str, Record | Mapping[str, ArchiveRecord]] = {}
    new_archives = dict(archives)
    seq = 0

    def place_outcomes(after: int) -> None:
        nonlocal seq
        for scene_id, record in sorted(by_round.get(after, []), key=lambda item: item[1].order):
            seq += 1
            sets[GAME.chunk(seq)] = Chunk.trusted(  # texts of records already validated
                seq=seq,
                user=record.meanwhile_event or "",
                assistant=record.closing_summary or "",
                origin="catalyst",
                catalyst_id=scene_id,
            )
            new_archives[scene_id] = record.model_copy(update={"outcome_seq": seq})

    place_outcomes(0)
    for r in sorted(rounds, key=lambda r: r.n):
        seq += 1
        origin: Literal["intervene", "seed", "round"] = (
            "intervene" if r.intervened else ("seed" if seeded else "round")
        )
        sets[GAME.chunk(seq)] = Chunk.trusted(
            seq=seq, user=r.input, assistant=r.output, origin=origin, round_id=r.n
        )
        place_outcomes(r.n)
    old = current.stack_meta()
    sets[GAME.meta] = StackMeta(next_seq=seq + 1, epoch=old.epoch + 1, forced_compression=forced)
    deletes = {key for key in current.all_keys() if key not in sets}
    if new_archives:
        sets[ARCHIVES] = new_archives
    elif archives_present:
        deletes.add(ARCHIVES)
    return sets, deletes

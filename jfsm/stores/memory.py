"""The in-memory store: a `StoreImage` and nothing else. Not durable; its async methods never
suspend (nothing to wait for)."""

from __future__ import annotations

from collections.abc import Mapping

from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.projection import Projection

__all__ = ["MemoryStore"]


class MemoryStore:
    """A store that lives in memory; `commit` is atomic because `StoreImage.apply` is."""

    durable = False

    def __init__(
        self,
        values: Mapping[str, bytes] | None = None,
        *,
        quota: int = QUOTA_BYTES,
    ) -> None:
        self._image = StoreImage(values, quota=quota)

    @property
    def image(self) -> StoreImage:
        return self._image

    async def commit(self, projection: Projection) -> None:
        self._image.apply(projection)

    async def seed(self, values: Mapping[str, bytes]) -> None:
        self._image = seeded_image(self._image, values)

    async def checkpoint(self) -> None:
        self._image.checkpoint()

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

"""Limits on what an archive may unpack to: total bytes, member count, compression ratio.

Every archive a server accepts (a registry upload, a ``working_dir`` package) is hostile
input until checked: a 2 MiB gzip of zeros unpacks to 2 GiB. ``ArchiveBudget`` is fed each
member's declared size *before* anything is written, and refuses the archive as soon as
one limit is passed; extraction then writes exactly the sizes that were checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from tandem._core.errors import TandemError

__all__ = ["ArchiveBudget", "ArchiveLimitError", "ArchiveLimits"]


class ArchiveLimitError(TandemError, ValueError):
    """An archive would unpack beyond a limit (HTTP 413); nothing was unpacked."""


@dataclass(frozen=True)
class ArchiveLimits:
    """What an archive may unpack to.

    Args:
        max_bytes: the most bytes all its members may hold together.
        max_members: the most files and folders it may hold.
        max_ratio: the most its unpacked size may be a multiple of its packed size, once
            it unpacks to more than ``ratio_floor_bytes`` (small archives of repetitive
            text compress well, and are harmless).
        ratio_floor_bytes: see ``max_ratio``.
    """

    max_bytes: int
    max_members: int = 10_000
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 8 * 2**20

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.max_members <= 0 or self.max_ratio <= 1:
            raise ValueError(f"ArchiveLimits needs positive limits (and max_ratio > 1); "
                             f"got {self}")


class ArchiveBudget:
    """Counts an archive's members against ``ArchiveLimits``.

    Args:
        limits: the limits.
        packed_bytes: the archive's own size (for the ratio).
        what: how messages name the archive ("the registry upload").
        hint: what to do about it, appended to messages.
    """

    def __init__(self, limits: ArchiveLimits, packed_bytes: int, what: str, hint: str) -> None:
        self.limits = limits
        self.packed = max(1, packed_bytes)
        self.what = what
        self.hint = hint
        self.total = 0
        self.members = 0

    def add(self, name: str, size: int) -> None:
        """Counts one member of ``size`` bytes.

        Raises:
            ArchiveLimitError: a limit is passed (named, with the numbers).
        """
        lim = self.limits
        self.members += 1
        self.total += max(0, size)
        if self.members > lim.max_members:
            raise ArchiveLimitError(
                f"{self.what} holds more than {lim.max_members} files and folders; "
                f"{self.hint}")
        if self.total > lim.max_bytes:
            raise ArchiveLimitError(
                f"{self.what} unpacks to more than {lim.max_bytes / 2**20:.1f} MiB (at "
                f"{name!r}: {self.total / 2**20:.1f} MiB so far, from "
                f"{self.packed / 2**20:.2f} MiB packed); {self.hint}")
        if self.total > lim.ratio_floor_bytes and self.total / self.packed > lim.max_ratio:
            raise ArchiveLimitError(
                f"{self.what} unpacks to {self.total / self.packed:.0f} times its packed "
                f"size (at {name!r}; at most {lim.max_ratio:g} times is taken): it looks "
                f"like an archive bomb; {self.hint}")

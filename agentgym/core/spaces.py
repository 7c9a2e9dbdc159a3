"""Spaces for text environments."""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

__all__ = ["AnyText"]

# Sampling draws from printable ASCII plus a few non-ASCII characters, so random actions exercise
# the same paths real model output does (quotes, brackets, "Zürich", "18°C").
_SAMPLE_CHARSET = string.printable + "äöüßéñ°·—€中文"


class AnyText(spaces.Text):
    """A ``Text`` space that contains any Python ``str`` up to ``max_length`` characters.

    Gymnasium's ``Text`` only contains strings drawn from its charset (alphanumeric by default),
    which rejects ordinary prose, JSON and Unicode. Membership here is by length alone;
    ``charset`` only shapes what :meth:`sample` draws.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"

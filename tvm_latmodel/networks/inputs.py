"""Descriptions of network inputs, and the seeded random values fed to them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InputSpec:
    """One input of a network.

    Attributes
    ----------
    name : str
        The argument name (``image``, ``audio``, ``tokens`` ...).
    shape : tuple of int
        Static shape, batch first.
    dtype : str
        ``float32`` for images and spectrograms, ``int64`` for token ids.
    high : int
        For integer inputs, values are drawn from ``[0, high)``; unused for floats.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    high: int = 0

    def random(self, rng: np.random.Generator) -> np.ndarray:
        """A random value of this input: standard normal floats, or uniform ids."""
        if self.dtype.startswith("int"):
            if self.high <= 0:
                raise ValueError(f"integer input {self.name!r} needs high > 0")
            return rng.integers(0, self.high, size=self.shape, dtype=self.dtype)
        return rng.standard_normal(self.shape).astype(self.dtype)

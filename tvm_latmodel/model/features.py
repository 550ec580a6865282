"""TVM's per-store features, extracted once per distinct scheduled module.

MetaSchedule's ``PerStoreFeature`` costs about 12 ms per 3x3-conv candidate
on this project's machine, and the same candidate is often featurised more
than once: ``predict`` scores it, ``update`` learns from it after it ran, and
an offline replay scores every logged candidate for every model, shot count
and seed. :class:`CachedPerStoreFeature` is a MetaSchedule feature extractor
(usable as ``XGBModel(extractor=...)``) that returns exactly what
``PerStoreFeature`` returns, remembering it per (target, structural hash of
the scheduled module). The cache is bounded (oldest entries go first) and
can be saved and loaded as plain arrays (``.npz`` without pickle).
:meth:`CachedPerStoreFeature.features_async` extracts in a background thread
(TVM's extractor is C++ and releases the GIL), so that the hybrid model's
Python analytical pass runs meanwhile; the cache is only read and written in
the calling thread.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np
import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

#: Columns of one per-store feature row (``PerStoreFeature`` defaults).
PER_STORE_FEATURE_COLUMNS = 164

# Layout of a row (per_store_feature.cc, TVM 0.27): group 1 (57 arithmetic
# columns), then group 2: 5 buffer slots of 18 columns, sorted by lines,
# then bytes (descending), then buffer name; ``bytes`` and ``lines`` are the
# slot's columns 3 and 5.
_GROUP2_START, _SLOT_COLUMNS, _SLOTS = 57, 18, 5
_SLOT_BYTES, _SLOT_LINES = 3, 5


def canonical_rows(rows: np.ndarray) -> np.ndarray:
    """``rows`` (per-store features of one candidate) with every run of
    group-2 buffer slots that tie on lines and bytes ordered by content.

    TVM breaks such ties by buffer name with a ``std::sort`` that is not
    stable, so two buffers of the same name (e.g. a depthwise conv's padded
    input and its cache) come out in either order from one extraction to
    the next (seen on 15 of 4,248 logged records, all DEP and MBV2). Their
    order is then fixed by the slots' values (descending), so equal
    candidates get equal rows. Rows without such a tie are returned as they
    are (the same array when no row has one).
    """
    if rows.ndim != 2 or rows.shape[1] != PER_STORE_FEATURE_COLUMNS or len(rows) == 0:
        return rows
    end = _GROUP2_START + _SLOT_COLUMNS * _SLOTS
    slots = rows[:, _GROUP2_START:end].reshape(len(rows), _SLOTS, _SLOT_COLUMNS)
    ties = ((slots[:, 1:, _SLOT_LINES] == slots[:, :-1, _SLOT_LINES])
            & (slots[:, 1:, _SLOT_BYTES] == slots[:, :-1, _SLOT_BYTES])
            & (slots[:, 1:] != slots[:, :-1]).any(axis=2))
    todo = np.flatnonzero(ties.any(axis=1))
    if len(todo) == 0:
        return rows
    rows = rows.copy()
    sub = slots[todo].copy()
    # Bubble sort of each tied run, descending by content, all rows at once
    # (a run never crosses a key change, so swaps keep the runs).
    idx = np.arange(len(sub))
    for _ in range(_SLOTS - 1):
        for k in range(_SLOTS - 1):
            a, b = sub[:, k], sub[:, k + 1]
            tie = (a[:, _SLOT_LINES] == b[:, _SLOT_LINES]) & (a[:, _SLOT_BYTES] == b[:, _SLOT_BYTES])
            differ = a != b
            first = differ.argmax(axis=1)
            swap = tie & differ.any(axis=1) & (a[idx, first] < b[idx, first])
            if swap.any():
                sub[swap, k], sub[swap, k + 1] = b[swap].copy(), a[swap].copy()
    rows[todo, _GROUP2_START:end] = sub.reshape(len(todo), -1)
    return rows


def per_store_sums(arrays) -> np.ndarray:
    """What the hybrid's residual reads of TVM's features: each candidate's
    :func:`canonical_rows` summed over its stores, shape ``(n, 164)``."""
    out = np.zeros((len(arrays), PER_STORE_FEATURE_COLUMNS))
    kept = [i for i, arr in enumerate(arrays) if arr.size]
    if not kept:
        return out
    # One pass over every row of every candidate (a predict has thousands).
    rows = canonical_rows(np.concatenate([arrays[i] for i in kept]))
    starts = np.cumsum([0] + [len(arrays[i]) for i in kept[:-1]])
    out[kept] = np.add.reduceat(rows, starts, axis=0)
    return out


class LRUCache:
    """A bounded mapping that forgets the least recently used entries first
    (for results that are pure functions of their key)."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self.data: OrderedDict = OrderedDict()

    def __contains__(self, key) -> bool:
        return key in self.data

    def __len__(self) -> int:
        return len(self.data)

    def get(self, key):
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key, value):
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.max_entries:
            self.data.popitem(last=False)
        return value


def candidate_keys(target, candidates) -> list[tuple[str, int]]:
    """The cache key of each candidate: its target and its module's
    structural hash (the target printed once)."""
    name = str(target)
    return [(name, int(tvm_ffi.structural_hash(c.sch.mod))) for c in candidates]


class PendingFeatures:
    """Features being extracted in a background thread (see
    :meth:`CachedPerStoreFeature.features_async`); :meth:`result` waits for
    them, stores them in the cache and returns them in candidate order."""

    def __init__(self, owner, keys, found, missing, thread=None, box=None):
        self._owner, self._keys, self._found, self._missing = owner, keys, found, missing
        self._thread, self._box = thread, box if box is not None else {"arrays": []}
        self._done = False

    def result(self) -> list[np.ndarray]:
        """The feature rows of every candidate (re-raises an extraction error)."""
        if not self._done:
            self.wait()
            if "error" in self._box:
                raise self._box["error"]
            self._owner._store(self._keys, self._found, self._missing, self._box.pop("arrays"))
            self._done = True
        return self._found

    def wait(self) -> None:
        """Wait for the extraction, ignoring its result and any error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


@derived_object
class CachedPerStoreFeature(ms.feature_extractor.PyFeatureExtractor):
    """``PerStoreFeature`` with a bounded cache keyed by :func:`candidate_keys`.

    Parameters
    ----------
    max_entries : int
        Candidates kept; the least recently used go first.
    """

    def __init__(self, *, max_entries: int = 100_000):
        super().__init__()
        self.max_entries = max_entries
        self._inner = ms.feature_extractor.PerStoreFeature()
        self.cache_ = LRUCache(max_entries)
        self.hits_ = 0
        self.misses_ = 0

    def features(self, context, candidates, keys=None) -> list[np.ndarray]:
        """Per-store feature rows of each candidate, as numpy arrays (as ``PerStoreFeature`` gives them).

        ``keys``: the candidates' :func:`candidate_keys` for ``context.target``, when already known.
        """
        keys, found, missing = self._lookup(context, candidates, keys)
        arrays = self._extract(context, [candidates[i] for i in missing]) if missing else []
        self._store(keys, found, missing, arrays)
        return found

    def features_async(self, context, candidates, keys=None) -> PendingFeatures:
        """:meth:`features`, with the missing candidates extracted in a
        background thread: TVM's extractor is C++ and releases the GIL, so
        the caller can do Python work meanwhile. The cache is read now and
        written by :meth:`PendingFeatures.result`, both in the calling thread."""
        import threading

        keys, found, missing = self._lookup(context, candidates, keys)
        if not missing:
            return PendingFeatures(self, keys, found, missing)
        todo = [candidates[i] for i in missing]
        box: dict = {}

        def work():
            try:
                box["arrays"] = self._extract(context, todo)
            except BaseException as err:  # noqa: BLE001 - re-raised by result()
                box["error"] = err

        thread = threading.Thread(target=work, name="CachedPerStoreFeature", daemon=True)
        thread.start()
        return PendingFeatures(self, keys, found, missing, thread, box)

    def _lookup(self, context, candidates, keys):
        if keys is None:
            keys = candidate_keys(context.target, candidates)
        found = [self.cache_.get(k) for k in keys]
        missing = [i for i, f in enumerate(found) if f is None]
        return keys, found, missing

    def _extract(self, context, candidates) -> list[np.ndarray]:
        return [f.numpy() for f in self._inner.extract_from(context, candidates)]

    def _store(self, keys, found, missing, arrays) -> None:
        for i, f in zip(missing, arrays):
            found[i] = self.cache_.put(keys[i], f)
        self.misses_ += len(missing)
        self.hits_ += len(keys) - len(missing)

    def extract_from(self, context, candidates):
        return [tvm.runtime.tensor(f) for f in self.features(context, candidates)]

    # ---------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the cache as ``.npz`` arrays (rows, offsets, keys): data only."""
        keys = list(self.cache_.data)
        rows = [self.cache_.data[k] for k in keys]
        offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
        flat = np.concatenate(rows) if rows else np.zeros((0, PER_STORE_FEATURE_COLUMNS))
        np.savez_compressed(path, rows=flat.reshape(-1, PER_STORE_FEATURE_COLUMNS), offsets=offsets,
                            targets=np.array([k[0] for k in keys], dtype=str),
                            hashes=np.array([k[1] for k in keys], dtype=np.uint64))

    def load(self, path: str | os.PathLike) -> int:
        """Add the entries saved at ``path``; returns how many. Never unpickles."""
        try:
            with np.load(path, allow_pickle=False) as z:
                rows, offsets, targets, hashes = z["rows"], z["offsets"], z["targets"], z["hashes"]
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"{path}: not a feature cache ({err})") from None
        if len(offsets) != len(hashes) + 1 or len(targets) != len(hashes) or rows.ndim != 2:
            raise ValueError(f"{path}: inconsistent feature cache arrays")
        for i, (t, h) in enumerate(zip(targets, hashes)):
            self.cache_.put((str(t), int(h)), rows[offsets[i]:offsets[i + 1]])
        return len(hashes)


_SHARED: CachedPerStoreFeature | None = None


def shared_extractor() -> CachedPerStoreFeature:
    """The process-wide :class:`CachedPerStoreFeature` (features are a pure
    function of target and module, so every model may share one)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = CachedPerStoreFeature(max_entries=50_000)
    return _SHARED

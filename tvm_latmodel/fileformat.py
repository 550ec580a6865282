"""Versioned JSON files: every file we write carries ``format``,
``format_version`` and ``package_version``, and reading one checks them."""

from __future__ import annotations

import json

from . import __version__


def read_versioned_json(path: str, fmt: str, version: int, what: str) -> dict:
    """Load ``path`` and check it is a ``fmt`` file of ``version``.

    Raises
    ------
    ValueError
        Naming the file: not JSON, not a ``what``, or another format version.
    """
    try:
        with open(path) as f:
            meta = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a JSON model file: {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise ValueError(f"{path}: not a tvm-latmodel {what} (format != {fmt!r})")
    if meta.get("format_version") != version:
        raise ValueError(f"{path}: {what} format version {meta.get('format_version')!r} is not the supported "
                         f"version {version} (written by tvm-latmodel {meta.get('package_version')}, "
                         f"this is {__version__})")
    return meta

"""The reproductions of TVM bugs in ``upstream/`` still reproduce on the installed TVM.

If one stops reproducing, TVM has fixed the bug. Then the workaround named in
``upstream/README.md`` may go, and this test with it.
"""

import os
import subprocess
import sys

import pytest

UPSTREAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "upstream")


@pytest.mark.parametrize("script", ["decompose_reduction.py", "reverse_compute_at_padding.py"])
def test_upstream_reproduction_still_reproduces(script):
    run = subprocess.run([sys.executable, os.path.join(UPSTREAM, script)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"{script}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    assert run.stdout.splitlines()[-1].startswith("reproduced")

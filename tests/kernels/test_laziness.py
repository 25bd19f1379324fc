"""The tables cost nothing until used: ``import kvroof`` does not load the package, and
importing it reads no table until the first lookup, which reads only that accelerator's."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def test_import_kvroof_does_not_import_the_kernel_tables() -> None:
    assert _run("import sys, kvroof; print('kvroof.kernels' in sys.modules)") == "False"


def test_tables_are_read_on_first_lookup_only() -> None:
    code = (
        "import kvroof.kernels as K\n"
        "from kvroof.kernels import store\n"
        "print(store.load.cache_info().currsize)\n"
        "K.covered('h100-sxm')\n"  # the index only
        "print(store.load.cache_info().currsize)\n"
        "K.gemm_efficiency('h100-sxm', 1, 1024, 1024)\n"
        "K.gemm_efficiency('h100-sxm', 2, 1024, 1024)\n"
        "print(store.load.cache_info().currsize, store.load.cache_info().misses)\n"
    )
    assert _run(code).split() == ["0", "0", "1", "1"]

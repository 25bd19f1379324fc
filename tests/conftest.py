from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.specs.registry import ENV_VAR, Registry

REPO = Path(__file__).resolve().parent.parent
HF_CONFIGS = REPO / "tests" / "data" / "hf_configs"


@pytest.fixture(autouse=True)
def _no_user_spec_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the built-in specs unless they set KVROOF_SPEC_PATH themselves."""
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture(scope="session")
def registry() -> Registry:
    return Registry(use_env=False)

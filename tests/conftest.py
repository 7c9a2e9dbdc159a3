"""Shared fixtures: the tiny language model is built once per test session (~15 s, offline)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> Path:
    from agentgym.trainers.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")

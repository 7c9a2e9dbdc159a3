"""Package discovery: every package under ``agentgym/``, ``envs/`` and ``trainers/``, the latter two installed as
``agentgym.envs`` and ``agentgym.trainers`` (the rest of the build is in pyproject.toml)."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["agentgym*"])
    + [f"agentgym.{p}" for p in find_packages(include=["envs*", "trainers*"])]
)

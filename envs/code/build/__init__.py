"""CodeSandbox's build-time generators: ``problems`` (the v0 problems) and ``families`` (the v1 task families),
which write the frozen task files in ``envs/code/data/``; nothing here runs when an env is made."""

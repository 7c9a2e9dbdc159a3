"""SQLLookup's build-time generator (:mod:`~agentgym.envs.sql.build.generate`): the database and question files
in ``envs/sql/data/``, from seeds; nothing here runs when an env is made."""

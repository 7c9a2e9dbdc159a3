"""WeatherRun's build-time generator (:mod:`~agentgym.envs.weather.build.snapshot`): the frozen snapshot in
``envs/weather/data/``; nothing here runs when an env is made."""

"""What agentgym serves over HTTP: ``env_server`` (envs over HTTP and WebSocket, for agentgym/Remote-v0),
``mcp_server`` (an env's tools over MCP), ``model_server`` (a local model behind an OpenAI-compatible endpoint),
``weather_server`` (WeatherRun's tools as a web service), all on ``http_service``, and ``viewer`` (a page of runs
and episodes, its files in ``static/``). Everything a client sends is hostile input."""

"""The web dashboard (`skiff dashboard`, and inside `skiff up`): cluster, topics, consumer
groups, messages, dead letters and timer slots, over `skiff.client` only.

docs/dashboard.md describes the pages and the JSON API.
"""

DEFAULT_PORT = 8080
"""Where `skiff dashboard` and `skiff up` serve it (rocketmq-dashboard's port too). Kept here,
free of the web stack, so the CLI can name it without importing aiohttp."""

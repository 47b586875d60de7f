"""The web dashboard (`skiff dashboard`, and inside `skiff up`): cluster, topics, consumer
groups, messages, dead letters and timer slots, over `skiff.client` only.

docs/dashboard.md describes the pages and the JSON API.
"""

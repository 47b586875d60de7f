"""The small shared model every other package builds on: messages, the stored
record layout, ids, clock, limits, configuration loading, errors and services."""

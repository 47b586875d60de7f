"""The client's internals behind its public facades (docs/client.md): client instance, route cache,
rebalance, offset stores. Nothing outside skiff.client imports them (an import-linter contract)."""

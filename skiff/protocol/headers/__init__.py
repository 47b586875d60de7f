"""Custom headers (extFields) of each request family, one module per family."""

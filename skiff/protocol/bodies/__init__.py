"""JSON bodies (routes, heartbeats, registrations, admin tables), one module per family."""

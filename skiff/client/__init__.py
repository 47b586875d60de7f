"""See docs/ and DESIGN.md for what this package holds."""

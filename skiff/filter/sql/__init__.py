"""SQL92 selectors: grammar, syntax tree, parser, printer, value rules and compiler."""

"""The broker's request handlers, one module per request family (docs/broker.md lists
every code). Each processor is thin: decode the header or body, call the managers
and the store, encode the answer; ``handlers()`` maps its request codes to methods."""

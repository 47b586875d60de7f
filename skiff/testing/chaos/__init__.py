"""An OpenChaos-style chaos run of a controller-mode broker group (`skiff chaos`, docs/reliability.md).

A history of every client operation and every injected fault (`history`), checkers over it that
know nothing of how it was made (`checkers`), the cluster in network namespaces (`lab`,
`cluster`), the faults (`faults`), the clients (ours in `workers`, RocketMQ's C++ and 5.x
clients in `foreign`), the run (`run`) and its plot (`plot`)."""

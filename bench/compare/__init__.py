"""The side-by-side benchmark: Skiff against RabbitMQ, Redis and NATS on one machine.

`run.py` is the entry point; `worker.py` is the client process each workload
starts; the other modules hold one concern each (child processes, servers,
client drivers, ceilings, the report).
"""

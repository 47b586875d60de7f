"""The broker: stores messages and serves producers, consumers and admin tools over
RocketMQ's remoting protocol (see docs/broker.md).

    broker_config, store_config = load_configs(read_properties_file("broker.conf"), overrides)
    server = BrokerServer(broker_config, store_config)
    await server.start()      # recover the store, listen, register with the NameServers
    ...
    await server.stop()       # unregister, drain, persist offsets, shut the store down
"""

from skiff.broker.config import BrokerConfig, BrokerRole, load_configs
from skiff.broker.server import BrokerServer

__all__ = ["BrokerConfig", "BrokerRole", "BrokerServer", "load_configs"]

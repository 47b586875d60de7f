"""Sans-IO codecs for RocketMQ's remoting protocol: bytes in, commands out, bytes back.

Nothing here touches a socket, a file or an event loop, so every codec is tested
and fuzzed without a network.
"""

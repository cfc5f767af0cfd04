"""The node's UDP endpoint: connect tokens over HTTP, then sealed datagrams
(:mod:`shared.datagram`), each connected client seated by the same sessions as a WebSocket
player (:mod:`server.net.links`)."""

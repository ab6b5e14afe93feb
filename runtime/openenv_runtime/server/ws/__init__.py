"""The ``/ws`` WebSocket endpoint: the handshake, the message loop and frames answered below ASGI."""

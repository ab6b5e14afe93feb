"""What protects the server from its clients: the bearer token and the size limits."""

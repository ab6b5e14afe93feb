"""What a server is told: its settings, resolved once, and the reference's options mapped onto them."""

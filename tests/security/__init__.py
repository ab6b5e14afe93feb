"""Hostile-ground tests: what an attacker planting files or settings tries, tried for real."""

"""The PostgreSQL implementation of the storage interface: its engines, raw pool and one-statement paths."""

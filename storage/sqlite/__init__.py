"""The SQLite implementation of the storage interface: its engine, driver access and fast paths."""

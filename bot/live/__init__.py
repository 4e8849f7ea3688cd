"""This process's in-memory state: requests just committed, pending states for a click's check, and the waiters of long-polls with their wake-ups."""

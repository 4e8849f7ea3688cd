"""Side effects committed with a state change: every item's one constructor (`effects`), the dispatcher that delivers them, and the egress guard for agent-chosen URLs."""

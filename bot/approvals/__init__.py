"""The use cases, the only callers of storage: submit, decide, wait, timers, batches, grants, App Home, outcomes, policy at submit."""

"""The tests' one set of helpers: the running app and its fixtures (`app`), waits on metrics
(`waits`), and the outbox (`outbox`: `drain` one pass, `settle` until nothing due is left, and the
`snapshot` that proves a refusal wrote nothing)."""

"""The tests' one set of helpers: the running app, its fixtures and `submit` (`app`), waits on metrics
(`waits`), the outbox (`outbox`: `drain` one pass, `settle` until nothing due is left, and the
`snapshot` that proves a refusal wrote nothing), subprocesses (`process`: `ServerProcess`,
`LoggedProcess`), the docs' snippets (`docs`) and the fuzz settings (`fuzz`). See tests/README.md."""

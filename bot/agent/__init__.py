"""Signoff's own agent runner: a durable Anthropic tool-use loop whose risky calls go through Signoff.

    tools.py       the tool registry (schemas from type hints, risk, previews, idempotency)
    demo_tools.py  the demo toolset (workspace files, email to an outbox folder, the web)
    questions.py   ask_human and question requests
    steps.py       one step of a run (a model call, or the last turn's tool calls)
    messages.py    what the model reads (API messages, tool results, errors)
    runner.py      who works on which run, leases, the recovery sweep
    runs.py        use cases: start, cancel, thread replies, answers
    slack.py       the run's messages in Slack (outbox) and the listeners
    blocks.py      Block Kit for runs and question cards (pure)
    effects.py     the outbox items of runs
    app.py         wiring into one process; cli.py: `signoff run`
"""

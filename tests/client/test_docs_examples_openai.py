"""The OpenAI Agents SDK page's copy-paste example (docs/integrations/openai-agents.md), run the way the page
says, against `signoff demo` (test_docs_examples.py's sandbox): saved in an empty folder and run with `python`
from a terminal with the export lines pasted, its card decided by a person on the sandbox page.
test_docs_examples.py's first test checks every marked example is run here or there."""

from __future__ import annotations

from pathlib import Path

from tests.support.docs import doc_example
from tests.client.test_docs_examples import RUNS, Sandbox, _no_example_left_running, finish, sandbox, start

__all__ = ["_no_example_left_running", "sandbox"]  # fixtures, used by name

SUMMARY = "Support agent wants to run send_email"
# `import agents` alone takes seconds on a busy machine: the example's card may take longer than most to appear.


def test_the_example_sends_what_was_approved_or_edited_and_the_model_reads_a_rejection(
        sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "refund_agent.py").write_text(doc_example("openai-agents"))

    running = start("python refund_agent.py", tmp_path, sandbox.env)
    request = sandbox.new_request(lambda r: r["summary"] == SUMMARY, timeout=RUNS)
    assert request["channel"] == sandbox.env["SIGNOFF_CHANNEL"]
    assert request["action"] == {"name": "send_email", "params": {"to": "customer@example.com", "subject": "Your refund"},
                                 "params_schema": request["action"]["params_schema"]}
    sandbox.person.approve(request["id"])
    code, out, err = finish(running)
    assert (code, out) == (0, "The tool said: sent to customer@example.com: Your refund\n"), err

    running = start("python refund_agent.py", tmp_path, sandbox.env)  # the same run id: its next turn, a new card
    request = sandbox.new_request(lambda r: r["summary"] == SUMMARY, timeout=RUNS)
    sandbox.person.click(request["id"], "signoff_edit")
    sandbox.person.act(kind="submit", view_id=sandbox.person.modal(),
                       raw={"p:to": {"value": "customer@example.com"}, "p:subject": {"value": "Your refund of $40"}})
    code, out, err = finish(running)
    assert (code, out) == (0, "The tool said: sent to customer@example.com: Your refund of $40\n"), err

    running = start("python refund_agent.py", tmp_path, sandbox.env)
    request = sandbox.new_request(lambda r: r["summary"] == SUMMARY, timeout=RUNS)
    sandbox.person.reject(request["id"], "Wrong amount: call them first")
    code, out, err = finish(running)
    assert (code, out) == (0, "The tool said: Wrong amount: call them first\n"), err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["order-A-1042.json"]

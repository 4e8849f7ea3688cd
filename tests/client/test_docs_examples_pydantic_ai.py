"""The Pydantic AI page's copy-paste examples (docs/integrations/pydantic-ai.md), run the way the page says,
against `signoff demo` (test_docs_examples.py's sandbox): each file saved in a folder and run with `python`,
its card decided by a person on the sandbox page. test_docs_examples.py's first test checks every marked
example is run here or there."""

from __future__ import annotations

from pathlib import Path

from tests.support.docs import doc_example
from tests.client.test_docs_examples import RUNS, Sandbox, _no_example_left_running, finish, sandbox, start
from tests.support.waits import until_sync

__all__ = ["_no_example_left_running", "sandbox"]  # fixtures, used by name


def test_the_inline_example_waits_for_the_person_and_goes_on_with_their_decision(sandbox: Sandbox,
                                                                                   tmp_path: Path) -> None:
    (tmp_path / "refund.py").write_text(doc_example("pydantic-ai-inline"))
    approved = start("python refund.py", tmp_path, sandbox.env)
    request = sandbox.new_request(lambda r: r["summary"] == "Run send_email")
    assert request["action"]["params"] == {"to": "customer@example.com", "subject": "Your refund"}
    sandbox.person.approve(request["id"])
    code, out, err = finish(approved)
    assert code == 0, err
    assert out.splitlines() == ["refund: send_email: sent to customer@example.com: Your refund"], (out, err)
    rejected = start("python refund.py", tmp_path, sandbox.env)
    request = sandbox.new_request(lambda r: r["summary"] == "Run send_email")
    sandbox.person.reject(request["id"], "Wait for the accountant")
    code, out, err = finish(rejected)
    assert code == 0, err
    assert out.splitlines() == ["refund: send_email: alice rejected this call in Slack: "
                                "Wait for the accountant"], (out, err)


def test_the_pause_example_ends_the_run_and_resumes_it_once_in_another_process(sandbox: Sandbox,
                                                                                tmp_path: Path) -> None:
    (tmp_path / "tidy.py").write_text(doc_example("pydantic-ai-pause"))
    code, out, err = finish(start("python tidy.py start", tmp_path, sandbox.env))
    assert code == 0, err
    batch = sandbox.new_request(lambda r: [i["action"]["name"] for i in r.get("items") or []] ==
                                ["send_email", "delete_file"])
    assert out.splitlines() == [f"tidy: paused; card posted for request {batch['id']}"], out
    code, out, err = finish(start("python tidy.py resume", tmp_path, sandbox.env))
    assert code == 0 and out.splitlines() == ["tidy: not decided yet; run it again later"], (out, err)
    sandbox.person.approve_selected(batch["id"], [0])  # the email; not the deletion
    until_sync(lambda: sandbox.request(batch["id"])["status"] != "pending", "the batch to be decided", timeout=RUNS)
    code, out, err = finish(start("python tidy.py resume", tmp_path, sandbox.env))
    assert code == 0, err
    [line] = out.splitlines()
    assert line.startswith("tidy: "), line
    assert sorted(line.removeprefix("tidy: ").split(" | ")) == [  # the step's calls answer in either order
        "delete_file: alice rejected this call in Slack.", "send_email: sent to customer@example.com: Tidied"], line
    code, out, err = finish(start("python tidy.py resume", tmp_path, sandbox.env))
    assert code == 0 and out.splitlines() == ["tidy: resumed elsewhere already"], (out, err)

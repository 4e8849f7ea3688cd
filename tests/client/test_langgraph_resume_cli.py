"""`signoff langgraph resume` as a person runs it: the installed console script, started in the folder that
holds myapp.py, with no PYTHONPATH. It imports the app from there (as `python -m` would), says what it
watches and which thread it resumed with which decision, and says nothing with --quiet."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from bot.sandbox.signed import plain_input
from tests.support.app import API_TOKEN, App
from tests.client.test_langgraph import decided

SIGNOFF = Path(sys.executable).parent / "signoff"  # the console script pip installed beside this Python

MYAPP = '''
import sqlite3
import sys
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from signoff import Rejected
from signoff.langgraph import approval


class State(TypedDict, total=False):
    to: str
    sent: str


def send(state: State) -> State:
    try:
        decision = approval("send_email", {"to": state["to"]}, summary="Send it", channel="C0123ABCD")
    except Rejected as no:
        return {"sent": f"not sent: {no.reason}"}
    return {"sent": "sent to " + decision.params["to"]}


def build_graph(checkpointer):
    return (StateGraph(State).add_node("send", send).add_edge(START, "send").add_edge("send", END)
            .compile(checkpointer=checkpointer))


if __name__ == "__main__":
    graph = build_graph(SqliteSaver(sqlite3.connect("checkpoints.db", check_same_thread=False)))
    graph.invoke({"to": sys.argv[2]}, {"configurable": {"thread_id": sys.argv[1]}})
'''


def environment(app: App) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SIGNOFF_")}
    return {**env, "SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN}


async def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def pause(app: App, tmp: Path, env: dict[str, str], thread: str, to: str) -> str:
    """Run myapp.py for one thread (it pauses at the interrupt and exits); the request it made."""
    code, out, err = await run([sys.executable, "myapp.py", thread, to], tmp, env)
    assert code == 0, err
    _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
    [request] = [r for r in listing["items"] if r["action"]["params"]["to"] == to]
    return str(request["id"])


async def test_the_console_script_imports_the_app_from_its_folder_and_says_what_it_resumed(
        app: App, tmp_path: Path) -> None:
    assert SIGNOFF.exists(), f"{SIGNOFF} is missing: pip install -e . installs it"
    app.slack.add_channel("C0123ABCD", "approvals")
    env = environment(app)
    assert "PYTHONPATH" not in env
    (tmp_path / "myapp.py").write_text(MYAPP)
    first = await pause(app, tmp_path, env, "refund-1", "a@example.com")
    await app.click(first, "U1", user_name="alice")
    await decided(app, first)

    command = [str(SIGNOFF), "langgraph", "resume", "--graph", "myapp:build_graph", "--db", "checkpoints.db", "--once"]
    code, out, err = await run(command, tmp_path, env)
    assert code == 0, (out, err)
    assert "No module named" not in err
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert "watching the checkpoints in" in lines[0] and "checkpoints.db" in lines[0] and app.url in lines[0]
    assert lines[1] == f"signoff langgraph resume: resumed thread refund-1: {first} approved by alice"

    second = await pause(app, tmp_path, env, "refund-2", "b@example.com")
    await reject(app, second, "not this one")
    code, out, err = await run(command, tmp_path, env)
    assert code == 0, err
    assert out.splitlines()[1:] == [f"signoff langgraph resume: resumed thread refund-2: {second} not approved "
                                    "(rejected by alice): not this one"], out

    third = await pause(app, tmp_path, env, "refund-3", "c@example.com")
    await reject(app, third, "nor this one")
    code, out, err = await run([*command, "--quiet"], tmp_path, env)
    assert code == 0, err
    assert out == ""  # --quiet: nothing printed, yet the thread was resumed
    code, out, _ = await run([sys.executable, "-c", "import sqlite3, myapp; from langgraph.checkpoint.sqlite import "
                              "SqliteSaver; g = myapp.build_graph(SqliteSaver(sqlite3.connect('checkpoints.db', "
                              "check_same_thread=False))); print(g.get_state({'configurable': {'thread_id': "
                              "'refund-3'}}).values['sent'])"], tmp_path, env)
    assert code == 0 and out.strip() == "not sent: nor this one", out  # the resume ran, as not approved


async def reject(app: App, request_id: str, reason: str) -> None:
    before = len(app.slack.calls_to("views.open"))
    await app.click(request_id, "U1", action="signoff_reject", user_name="alice")  # opens the reason form
    view = (await app.slack.wait_for("views.open", count=before + 1))[-1].args["view"]
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id=view["callback_id"],
                                           private_metadata=view["private_metadata"],
                                           values={"reason": {"value": plain_input(reason)}})
    assert (await decided(app, request_id))["status"] == "rejected"

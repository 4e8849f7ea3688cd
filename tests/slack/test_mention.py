"""@signoff in a channel answers the person who mentioned it, and only them, with what waits on them."""

from __future__ import annotations

from tests.support.app import App


async def test_a_mention_answers_with_what_waits_on_that_person(app: App) -> None:
    waiting = await app.submit(summary="Refund order 1234", approvers=["U1"])
    await app.card(waiting["id"])
    response = await app.slack_client.event({"type": "app_mention", "user": "U1", "channel": "C1",
                                             "text": "<@UBOT> what is waiting?", "ts": "1700000000.000200",
                                             "event_ts": "1700000000.000200"})
    assert response.status == 200
    [answer] = await app.slack.wait_for("chat.postEphemeral")
    assert answer.args["user"] == "U1" and answer.args["channel"] == "C1"
    assert "*Waiting for you* (1)" in str(answer.args["blocks"]) and "Refund order 1234" in str(answer.args["blocks"])
    # Someone with nothing waiting is told so, in the thread they asked in.
    await app.slack_client.event({"type": "app_mention", "user": "U3", "channel": "C1", "text": "<@UBOT>",
                                  "ts": "1700000000.000300", "thread_ts": "1700000000.000100",
                                  "event_ts": "1700000000.000300"})
    answers = await app.slack.wait_for("chat.postEphemeral", count=2)
    assert answers[1].args["user"] == "U3" and answers[1].args["thread_ts"] == "1700000000.000100"
    assert "Nothing here." in str(answers[1].args["blocks"])
    assert not [c for c in app.slack.calls_to("chat.postMessage") if c.args.get("channel") == "C1"
                and "Waiting" in str(c.args)]

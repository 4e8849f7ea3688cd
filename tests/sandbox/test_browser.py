"""`signoff demo` in a real browser: a person clicks, types and fills modals on the sandbox page, and
the bot's production code paths answer (the page signs each action like Slack and posts it to
/slack/events). Headless Chromium from Debian; see tests/sandbox/browser.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.app import ROOT
from tests.sandbox.browser import CHROMIUM, CHROMIUM_ARGS, DemoProcess, require_chromium, start_demo

SCREENSHOT = ROOT / "docs" / "sandbox.png"
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoProcess]:
    require_chromium()
    # Sweep timers every 0.2 s, so a reminder and an escalation due after a second or two show up at once.
    running = start_demo(tmp_path_factory.mktemp("demo"), SIGNOFF_SWEEP_SECONDS="0.2")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser(demo: DemoProcess) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def setup_module() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)


def open_as(browser: Any, demo: DemoProcess, user: str, *, phone: bool = False) -> Any:
    viewport = {"width": 390, "height": 844} if phone else {"width": 1200, "height": 900}
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{demo.url}/?user={user}")
    return page


def test_the_demo_run_edit_approve_reject_and_answer(browser: Any, demo: DemoProcess, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = open_as(browser, demo, "UALICE")
    root = page.locator("section.channel article.msg", has_text="Agent run")
    root.locator("[data-open-thread]").click()
    thread = page.locator("section.thread")
    email = thread.locator("article.msg", has_text="customers@example.com")
    expect(email.get_by_role("button", name="Edit")).to_be_visible()
    page.screenshot(path=str(SCREENSHOT if os.environ.get("SIGNOFF_UPDATE_SCREENSHOT") else tmp_path / "page.png"))

    email.get_by_role("button", name="Edit").click()  # the email's edit form, from the tool's JSON Schema
    modal = page.locator("form.modal")
    subject = modal.locator(".blk.input", has_text="subject").locator("input, textarea")
    expect(subject).to_have_value("Release 2.4 is out")
    subject.fill("Release 2.4 is out today")
    modal.get_by_role("button", name="Approve", exact=True).click()
    expect(modal).to_be_hidden()
    expect(email).to_contain_text("Approved")
    expect(email).to_contain_text("Release 2.4 is out today")
    expect(email.get_by_role("button", name="Edit")).to_have_count(0)

    # The run goes on: the email was sent with the edited subject, and the file write asks next.
    diff = thread.locator("article.msg", has_text="RELEASE_NOTES.md")
    diff.get_by_role("button", name="Reject").click()
    modal.locator("textarea, input[type=text]").first.fill("Not before the release is tagged")
    modal.get_by_role("button", name="Reject").click()
    expect(diff).to_contain_text("Rejected")
    expect(diff).to_contain_text("Not before the release is tagged")
    [sent] = list((demo.workdir / "outbox").glob("*.eml"))
    assert "Subject: Release 2.4 is out today" in sent.read_text()
    notes = (demo.workdir / "workspace" / "RELEASE_NOTES.md").read_text()
    assert "2.4" not in notes  # rejected: never written

    question = thread.locator("article.msg", has_text="Where should I post the announcement next?").first
    question.get_by_role("button", name="#releases").click()
    expect(question.get_by_role("button", name="#releases")).to_have_count(0)
    expect(question).to_contain_text("Answered")
    expect(thread).to_contain_text("Done.")
    expect(root).to_contain_text("Completed")
    # The last message says what became of each step in words, not the tool results the model read.
    last = thread.locator("article.msg", has_text="Done.")
    expect(last).to_contain_text("Emailed customers@example.com: “Release 2.4 is out today”")
    expect(last).to_contain_text("RELEASE_NOTES.md was not changed")
    expect(last).to_contain_text("alice chose #releases")
    expect(last).not_to_contain_text("Slack user UALICE")


def test_a_question_answered_by_a_thread_reply(browser: Any, demo: DemoProcess) -> None:
    from playwright.sync_api import expect

    asked = demo.api("POST", "/api/v1/questions", {
        "questions": [{"question": "Which region first?", "options": [{"label": "EU"}, {"label": "US"}]}],
        "channel": "CAPPROVALS", "requested_by": "my-own-agent"})
    page = open_as(browser, demo, "UMORGAN")
    card = page.locator("section.channel article.msg", has_text="Which region first?")
    card.locator("[data-open-thread]").click()
    page.locator("#say").fill("Asia, then EU")
    page.locator("#say").press("Enter")
    expect(page.locator("section.thread")).to_contain_text("Asia, then EU")
    expect(card).to_contain_text("Answered")
    answered = demo.api("GET", f"/api/v1/questions/{asked['id']}?wait=10")
    assert answered["status"] == "answered" and "Asia, then EU" in str(answered)


def test_an_outsiders_click_is_refused_with_an_ephemeral_message_on_a_phone(
    browser: Any, demo: DemoProcess
) -> None:
    from playwright.sync_api import expect

    demo.api("POST", "/api/v1/approvals", {
        "action": {"name": "refund", "params": {"order": "B-7"}}, "summary": "Refund order B-7 <b>now</b> @channel",
        "context": "<script>document.title='pwned'</script> <img src=x onerror=alert(1)>",
        "channel": "CAPPROVALS", "approvers": ["UALICE"], "requested_by": "my-own-agent"})
    page = open_as(browser, demo, "UOSCAR", phone=True)
    card = page.locator("section.channel article.msg", has_text="Refund order B-7")
    card.get_by_role("button", name="Approve", exact=True).click()
    note = page.locator("article.ephemeral", has_text="You are not one of the approvers")
    expect(note).to_contain_text("Only visible to you")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()  # nothing was decided
    # Agent text is shown as text: no element, no script ran, no @channel mention.
    expect(card).to_contain_text("<b>now</b>")
    assert card.locator("b, script, img").count() == 0 and page.title() == "Signoff sandbox"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.locator("#who").select_option("UALICE")  # Alice does not see Oscar's note
    expect(page.locator("article.ephemeral", has_text="You are not one of the approvers")).to_have_count(0)


def test_a_reminder_and_an_escalation_appear_in_the_thread(browser: Any, demo: DemoProcess) -> None:
    from playwright.sync_api import expect

    demo.api("POST", "/api/v1/approvals", {
        "action": {"name": "deploy", "params": {"service": "api"}}, "summary": "Deploy the api service",
        "channel": "CAPPROVALS", "approvers": ["UALICE"], "requested_by": "my-own-agent",
        "reminders": {"every": "1s", "max": 1}, "escalation": {"levels": [{"after": "2s", "notify": ["UMORGAN"]}]}})
    page = open_as(browser, demo, "UMORGAN")
    card = page.locator("section.channel article.msg", has_text="Deploy the api service")
    expect(card.locator("[data-open-thread]")).to_contain_text("2 replies")
    card.locator("[data-open-thread]").click()
    thread = page.locator("section.thread")
    expect(thread).to_contain_text("Reminder 1 of 1")
    expect(thread).to_contain_text("Escalated to @morgan")
    expect(card).to_contain_text("Escalated to")
    card.get_by_role("button", name="Approve", exact=True).click()  # escalated with add_as_approvers: Morgan may decide
    expect(card).to_contain_text("Approved")


def test_the_page_shows_the_printed_export_lines_and_keeps_how_long_ago_true(browser: Any, demo: DemoProcess) -> None:
    from playwright.sync_api import expect

    printed = [line for line in demo.printed.splitlines() if line.startswith("export SIGNOFF_")]
    assert len(printed) == 3
    demo.api("POST", "/api/v1/approvals", {
        "action": {"name": "deploy", "params": {"service": "web"}}, "summary": "Deploy the web service",
        "channel": "CAPPROVALS", "approvers": ["UALICE"], "requested_by": "my-own-agent"})
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_default_timeout(WAIT_MS)
    page.clock.install()  # the page's clock, driven below: no waiting for minutes to pass
    page.goto(f"{demo.url}/?user=UALICE")
    page.locator("#connect summary").click()
    expect(page.locator("#exports")).to_be_visible()
    assert page.locator("#exports").inner_text().splitlines() == printed
    expect(page.locator("#connect")).to_contain_text("UALICE")
    expect(page.locator("#connect")).to_contain_text("plays one script whatever the task")
    page.set_viewport_size({"width": 390, "height": 844})  # open on a phone: the long lines scroll in their box
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.set_viewport_size({"width": 1200, "height": 900})
    card = page.locator("section.channel article.msg", has_text="Deploy the web service")
    expect(card).to_contain_text("requested just now")
    page.clock.fast_forward("05:00")
    expect(card).to_contain_text("requested 5 minutes ago")


def test_a_run_started_on_the_page_says_it_plays_one_script_and_how_to_approve_it(browser: Any, demo: DemoProcess) -> None:
    from playwright.sync_api import expect

    page = open_as(browser, demo, "UALICE")
    page.locator("#say").fill("/signoff run Tell ops@example.com that the database password was rotated")
    page.locator("#say").press("Enter")
    root = page.locator("section.channel article.msg", has_text="the database password was rotated")
    root.locator("[data-open-thread]").click()
    email = page.locator("section.thread article.msg", has_text="ops@example.com",  # the address from the task
                         has=page.get_by_role("button", name="Approve", exact=True))
    expect(email).to_contain_text("plays one script whatever the task")
    email.get_by_role("button", name="Approve", exact=True).click()  # Alice started it: separation of duties
    note = page.locator("article.ephemeral", has_text="separation of duties")
    expect(note).to_contain_text("pick another person under “You are”")
    expect(email.get_by_role("button", name="Approve", exact=True)).to_be_visible()  # nothing was decided

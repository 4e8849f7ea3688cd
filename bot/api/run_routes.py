"""Agent API for runs and questions (bearer auth and JSON errors come from `bot.api.routes`).

    POST /api/v1/runs                 {task, channel?, agent?, requested_by?} -> 201 run
    GET  /api/v1/runs/{id}?wait=N     the run; with wait, returns as soon as it has ended (N <= 60 s)
    POST /api/v1/runs/{id}/cancel     stop at the next step boundary
    POST /api/v1/questions            {questions: [{question, options: [{label, description?}], ...}], channel?}
    GET  /api/v1/questions/{id}?wait=N  the question and, once answered, its answers
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

from aiohttp import web
from pydantic import Field, field_validator

from bot.agent.questions import DESCRIPTION_MAX, HEADER_MAX, LABEL_MAX, QUESTION_MAX, check_questions, question_spec
from bot.agent.runner import Runner
from bot.agent.run_service import RunService
from bot.domain.wire import question_json
from bot.api import owners
from bot.api.run_keys import check_run_owner, start_once
from bot.api.routes import (SERVICE, SETTINGS, channel_or_default, check_callback, float_param, idempotency_key,
                            signed)
from bot.api.schemas import Approvers, _Strict, body_hash, parse_body
from bot.domain.values import CHANNEL_ID
from bot.api.timing_in import expand_groups
from bot.domain.model import Kind
from bot.domain.runs import NewRun
from bot.domain.timing import Timing
from bot.errors import InvalidInput, NotFound, RunsUnavailable

NO_MODEL_KEY = ("this server cannot run agents: ANTHROPIC_API_KEY is not set; set it (environment or .env) "
                "and restart `signoff serve`")

RUNS = web.AppKey("runs", RunService)
RUNNER = web.AppKey("runner", Runner)
DEFAULT_AGENT = web.AppKey("default_agent", str)
MAX_WAIT = 60.0


def _channel(value: str | None) -> str | None:
    if value is not None and not CHANNEL_ID.match(value):
        raise ValueError(f"{value[:40]!r} is not a Slack channel id (like C0123ABCD)")
    return value


class RunIn(_Strict):
    task: str = Field(min_length=1, max_length=20_000)
    channel: str | None = None
    agent: str | None = Field(default=None, max_length=100)
    requested_by: str | None = Field(default=None, max_length=200)

    @field_validator("channel")
    @classmethod
    def _channel_id(cls, value: str | None) -> str | None:
        return _channel(value)

    @field_validator("task")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class OptionIn(_Strict):
    label: str = Field(min_length=1, max_length=LABEL_MAX)
    description: str | None = Field(default=None, max_length=DESCRIPTION_MAX)


class QuestionIn(_Strict):
    question: str = Field(min_length=1, max_length=QUESTION_MAX)
    header: str | None = Field(default=None, max_length=HEADER_MAX)
    options: list[OptionIn] = Field(min_length=2, max_length=4)
    multi_select: bool = False


class QuestionsIn(_Strict):
    questions: list[QuestionIn] = Field(min_length=1, max_length=4)
    summary: str | None = Field(default=None, max_length=300)
    context: str | None = Field(default=None, max_length=20_000)
    channel: str | None = None
    approvers: Approvers = Field(default_factory=list)
    callback_url: str | None = Field(default=None, max_length=2000, pattern=r"^https?://")
    requested_by: str | None = Field(default=None, max_length=200)

    @field_validator("channel")
    @classmethod
    def _channel_id(cls, value: str | None) -> str | None:
        return _channel(value)


def api_origin(requested_by: str | None) -> str | None:
    """What an API client says about who asked, kept as text: a value shaped like a Slack user id would
    render as a mention (a ping, and a person it may not be) and count as the run's starter."""
    if requested_by is not None and re.match(r"^[UW][A-Z0-9]{1,39}$", requested_by):
        return f"api:{requested_by}"
    return requested_by


async def create_run(request: web.Request) -> web.Response:
    runs = request.app[RUNS]
    body: RunIn = parse_body(RunIn, await request.read())
    if not request.app[SETTINGS].anthropic_api_key:
        # Accepting it would leave a run `running` that no process can ever drive.
        raise RunsUnavailable(NO_MODEL_KEY)
    new = NewRun(task=body.task, channel=channel_or_default(request, body.channel),
                 agent=body.agent or request.app[DEFAULT_AGENT], requested_by=api_origin(body.requested_by))
    run, created = await start_once(runs, new, owner=owners.token_of(request).name,
                                    key=owners.scoped_key(request, idempotency_key(request)))
    response = web.json_response(await runs.run_json(run), status=201 if created else 200)
    response.headers["Location"] = f"/api/v1/runs/{run.id}"
    return response


async def get_run(request: web.Request) -> web.Response:
    runs, runner = request.app[RUNS], request.app[RUNNER]
    run_id = request.match_info["id"]
    wait = float_param(request, "wait", default=0.0, low=0.0, high=MAX_WAIT)
    run = await runs.get(run_id)
    await check_run_owner(request, runs, run_id)
    if wait > 0 and not run.status.is_final:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        with runner.waiters.register(run_id) as changed:
            while not run.status.is_final and loop.time() < deadline and not runner.waiters.closing:
                run = await runs.get(run_id)  # re-read after registering: a change in between is not missed
                if run.status.is_final:
                    break
                try:
                    await asyncio.wait_for(changed.wait(), deadline - loop.time())
                except TimeoutError:
                    pass
                changed.clear()
        run = await runs.get(run_id)
    return web.json_response(await runs.run_json(run))


async def cancel_run(request: web.Request) -> web.Response:
    runs = request.app[RUNS]
    await runs.get(request.match_info["id"])
    await check_run_owner(request, runs, request.match_info["id"])
    run, asked = await runs.cancel(request.match_info["id"], by=None)
    body = await runs.run_json(run)
    if not asked:
        state = "already being cancelled" if run.cancel_requested else f"already {run.status.value}"
        return web.json_response({"error": {"code": "not_running", "message": f"run is {state}"}, "run": body},
                                 status=409)
    return web.json_response(body, status=202)


async def create_question(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    raw = await request.read()
    body: QuestionsIn = parse_body(QuestionsIn, raw)
    questions = [q.model_dump(exclude_none=True) for q in body.questions]
    problem = check_questions(questions)
    if problem:
        raise InvalidInput(problem, details=[{"field": "questions", "message": problem}])
    await check_callback(request, body.callback_url)
    key = owners.scoped_key(request, idempotency_key(request))
    # The same check as for approvals: a user group Slack does not know is a 400 (nobody could answer).
    members = await expand_groups(service.directory, body.approvers, Timing(), escalation_given=True)
    spec = question_spec(
        questions, channel=channel_or_default(request, body.channel), summary=body.summary, context=body.context,
        requested_by=body.requested_by, callback_url=body.callback_url, approvers=tuple(dict.fromkeys(body.approvers)),
        approver_users=members,
    )
    spec = replace(spec, extra={**spec.extra, **owners.stamp(request)})
    created, is_new = await service.submit(spec, idempotency_key=key, body_hash=body_hash(body))
    response = web.json_response(signed(request, question_json(created)), status=201 if is_new else 200)
    response.headers["Location"] = f"/api/v1/questions/{created.id}"
    return response


async def get_question(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    question_id = request.match_info["id"]
    if not re.match(r"^qst_[0-9a-z]{26}$", question_id):
        raise NotFound(f"no question with id {question_id!r}")
    wait = float_param(request, "wait", default=0.0, low=0.0, high=MAX_WAIT)
    owners.check(request, (await service.get(question_id)).extra.get(owners.OWNER), "question", question_id)
    found = await service.wait(question_id, wait)
    if found.kind is not Kind.QUESTION:
        raise NotFound(f"no question with id {question_id!r}")
    return web.json_response(signed(request, question_json(found)))


def add_routes(app: web.Application, runs: RunService, runner: Runner, default_agent: str) -> None:
    app[RUNS] = runs
    app[RUNNER] = runner
    app[DEFAULT_AGENT] = default_agent
    app.router.add_post("/api/v1/runs", create_run)
    app.router.add_get("/api/v1/runs/{id}", get_run)
    app.router.add_post("/api/v1/runs/{id}/cancel", cancel_run)
    app.router.add_post("/api/v1/questions", create_question)
    app.router.add_get("/api/v1/questions/{id}", get_question)


"""The dashboard's HTTP side (aiohttp): server-rendered pages, and the JSON API that the
pages' forms post to and their live parts poll.

Every read has one function giving a dict; a page renders it with its template,
``/api/...`` returns it as JSON. Every change is an API call only (the pages'
forms post JSON through static/dashboard.js), so each action is written once.
Errors a user can cause answer 400 (404 for what does not exist) with the reason; a topic
whose broker group has no master for now (a failover) answers 503.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import orjson
from aiohttp import web

from skiff.client.errors import MessageValidationError, NameServerUnavailableError, NoMasterError, NoRouteError
from skiff.common.errors import SkiffError
from skiff.dashboard import users
from skiff.dashboard.form import Form
from skiff.dashboard.service import Dashboard
from skiff.dashboard.sessions import SESSION_COOKIE, LoginError, Sessions
from skiff.protocol.errors import ConnectionClosed, NoPermissionError, RequestTimeout, TopicNotExistError

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SESSIONS_KEY = web.AppKey("sessions", Sessions)
TEMPLATES_KEY = web.AppKey("templates", jinja2.Environment)
Read = Callable[[Dashboard, web.Request], Awaitable[dict[str, Any]]]


def _form(request: web.Request) -> Form:
    return Form(request.query)


async def _body(request: web.Request) -> Form:
    """The JSON body as a `Form`. Only ``application/json`` is read: a browser sends that type
    to another site only after asking it (CORS preflight, which this server never grants), so
    a page elsewhere cannot make a visitor's browser act on the dashboard."""
    if not request.can_read_body:
        return Form({})
    if request.content_type != "application/json":
        raise MessageValidationError(f"send the body as application/json, not {request.content_type}")
    try:
        return Form(await request.json(loads=orjson.loads))
    except orjson.JSONDecodeError as exc:
        raise MessageValidationError(f"the body is not JSON: {exc}") from None


READS: dict[str, tuple[str, Read]] = {
    # path: (template, read)
    "/": ("cluster.html", lambda d, r: d.cluster()),
    "/topics": ("topics.html", lambda d, r: d.topics()),
    "/topics/{topic}": ("topic.html", lambda d, r: d.topic(r.match_info["topic"])),
    "/groups": ("groups.html", lambda d, r: d.groups()),
    "/groups/{group}": ("group.html", lambda d, r: d.group(r.match_info["group"])),
    "/messages": ("messages.html", lambda d, r: _maybe_query(d, r)),
    "/message": ("message.html", lambda d, r: d.messages.detail(_form(r).text("msg_id"),
                                                                 _form(r).text("topic", "") or None)),
    "/dlq": ("dlq.html", lambda d, r: _maybe_dlq(d, r)),
    "/timer": ("timer.html", lambda d, r: d.timer()),
    "/users": ("users.html", lambda d, r: users.users_page(d)),
}

ACTIONS: list[tuple[str, str, Read]] = [
    ("POST", "/api/topics", lambda d, r: _with_body(r, d.save_topic)),
    ("DELETE", "/api/topics/{topic}", lambda d, r: d.delete_topic(r.match_info["topic"])),
    ("POST", "/api/topics/{topic}/send", lambda d, r: _with_body(r, lambda f: d.send(r.match_info["topic"], f))),
    ("POST", "/api/groups", lambda d, r: _with_body(r, d.save_group)),
    ("POST", "/api/groups/{group}/reset-offset",
     lambda d, r: _with_body(r, lambda f: d.reset_offset(r.match_info["group"], f))),
    ("POST", "/api/groups/{group}/consume", lambda d, r: _with_body(r, lambda f: d.consume(r.match_info["group"], f))),
    ("POST", "/api/resend", lambda d, r: _with_body(r, d.messages.resend)),
    ("GET", "/api/rates", lambda d, r: _rates(d)),
    ("POST", "/api/users", lambda d, r: _with_body(r, lambda f: users.create_user(d, f))),
    ("POST", "/api/users/{user}/status",
     lambda d, r: _with_body(r, lambda f: users.set_user_status(d, r.match_info["user"], f))),
    ("DELETE", "/api/users/{user}", lambda d, r: users.delete_user(d, r.match_info["user"])),
    ("POST", "/api/acls", lambda d, r: _with_body(r, lambda f: users.set_entry(d, f))),
    ("POST", "/api/acls/delete", lambda d, r: _with_body(r, lambda f: users.delete_entry(d, f))),
]


async def _with_body(request: web.Request, act: Callable[[Form], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    return await act(await _body(request))


async def _rates(d: Dashboard) -> dict[str, Any]:
    return d.live_rates()


async def _maybe_query(d: Dashboard, r: web.Request) -> dict[str, Any]:
    form = _form(r)
    if not (form.text("msg_id", "") or form.text("topic", "")):
        return {"messages": None, "query": {}}
    return {**await d.messages.query(form), "query": dict(r.query)}


async def _maybe_dlq(d: Dashboard, r: web.Request) -> dict[str, Any]:
    group = _form(r).text("group", "")
    return await d.messages.dlq(group) if group else {"group": "", "messages": None}


class LoginNeeded(SkiffError):
    """The brokers refuse unsigned requests and this browser has not signed in."""

    def __init__(self) -> None:
        super().__init__("the brokers have ACL on: sign in with an access key and secret key")


async def _dashboard_for(request: web.Request) -> Dashboard:
    """The signed-in session's clients, else the dashboard's own when the brokers take them."""
    sessions = request.app[SESSIONS_KEY]
    dashboard = await sessions.get(request.cookies.get(SESSION_COOKIE))
    if dashboard is not None:
        return dashboard
    if await sessions.login_required():
        raise LoginNeeded()
    return sessions.anonymous


def _status_of(exc: Exception) -> int:
    if isinstance(exc, (LoginNeeded, LoginError)):
        return 401
    if isinstance(exc, NoPermissionError):
        return 403
    if isinstance(exc, NoMasterError):  # the topic exists; its group has no master for now (a failover)
        return 503
    if isinstance(exc, (NoRouteError, TopicNotExistError)):
        return 404
    if isinstance(exc, (RequestTimeout, ConnectionClosed, NameServerUnavailableError)):
        return 502
    return 400


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data, default=str), status=status, content_type="application/json")


def _page_handler(template: jinja2.Template, read: Read, path: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def page(request: web.Request) -> web.Response:
        try:
            dashboard = await _dashboard_for(request)
            data, error, status = await read(dashboard, request), None, 200
        except LoginNeeded:
            raise web.HTTPSeeOther(f"/login?next={request.path_qs}") from None
        except SkiffError as exc:
            dashboard, data, error, status = None, {}, str(exc), _status_of(exc)
        html = template.render(data=data, error=error, request=request, path=path, user=_user(dashboard))
        return web.Response(text=html, status=status, content_type="text/html")
    return page


def _user(dashboard: Dashboard | None) -> str | None:
    return dashboard.credentials.access_key if dashboard is not None and dashboard.credentials else None


def _api_handler(read: Read) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def api(request: web.Request) -> web.Response:
        try:
            return _json(await read(await _dashboard_for(request), request))
        except SkiffError as exc:
            return _json({"error": str(exc)}, _status_of(exc))
    return api


async def login_page(request: web.Request) -> web.Response:
    html = request.app[TEMPLATES_KEY].get_template("login.html").render(
        data={}, error=None, request=request, path="/login", user=None)
    return web.Response(text=html, content_type="text/html")


async def login(request: web.Request) -> web.Response:
    """Sign in: check the keys against the brokers, then set the session cookie."""
    try:
        form = await _body(request)
        sessions = request.app[SESSIONS_KEY]
        token = await sessions.login(form.text("access_key"), form.text("secret_key"))
    except SkiffError as exc:
        return _json({"error": str(exc)}, _status_of(exc))
    await sessions.logout(request.cookies.get(SESSION_COOKIE))  # signing in as someone else ends the old one
    resp = _json({"access_key": form.text("access_key")})
    resp.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Strict", path="/")
    return resp


async def logout(request: web.Request) -> web.Response:
    await request.app[SESSIONS_KEY].logout(request.cookies.get(SESSION_COOKIE))
    resp = _json({})
    resp.del_cookie(SESSION_COOKIE, path="/")
    return resp


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=jinja2.select_autoescape(default=True), undefined=jinja2.ChainableUndefined)
    env.filters["time"] = format_time_ms
    env.filters["json"] = lambda v: orjson.dumps(v, default=str).decode()
    return env


def format_time_ms(ms: int) -> str:
    """UTC to the millisecond ('-' for never): pages and logs of different hosts line up."""
    if not ms or ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(sep=" ", timespec="milliseconds")[:-6] + "Z"


def build_app(sessions: Sessions) -> web.Application:
    """The app over ``sessions`` (the dashboard's own clients, and those of signed-in people)."""
    app = web.Application()
    app[SESSIONS_KEY] = sessions
    env = app[TEMPLATES_KEY] = templates()
    for path, (name, read) in READS.items():
        app.router.add_get(path, _page_handler(env.get_template(name), read, path))
        app.router.add_get("/api" + (path if path != "/" else "/cluster"), _api_handler(read))
    for method, path, act in ACTIONS:
        app.router.add_route(method, path, _api_handler(act))
    app.router.add_get("/login", login_page)
    app.router.add_post("/api/login", login)
    app.router.add_post("/api/logout", logout)
    app.router.add_static("/static", HERE / "static")
    return app

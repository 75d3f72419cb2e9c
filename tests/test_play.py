"""`gomoku-jax play`: the JSON API without a browser, then one real game in headless Chromium."""

import http.client
import json
import os
import re
import pathlib
import shutil
import threading
import urllib.error
import urllib.request

import jax
import numpy as np
import pytest

from gomoku_jax import exported, networks
from gomoku_jax import io as gio
from gomoku_jax import search as search_lib
from gomoku_jax.agents import Agent
from gomoku_jax.game import Gomoku
from gomoku_jax.play import PlayApp, PlayError, _win_line, make_server

ROOT = pathlib.Path(__file__).parents[1]


# ------------------------------------------------------------------ helpers
class Client:
    """A JSON client for one server: ``(status, body)`` per request."""

    def __init__(self, base):
        self.base = base

    def request(self, method, path, body=None, raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body=None, raw=None):
        return self.request("POST", path, {} if body is None and raw is None else body, raw)


def _raw(base, method, path, headers, body=None, length=True):
    """``(status, JSON body)`` of one request with exactly ``headers`` (no Host, Origin or
    Content-Type unless given there), as another web page or a rebound name could send it;
    a ``body``'s Content-Length is added unless ``length`` is False."""
    host, port = base.rsplit("/", 1)[1].rsplit(":", 1)
    connection = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=120)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None and length:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _port(client):
    return int(client.base.rsplit(":", 1)[1])


def _serve(app):
    server = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def served():
    app = PlayApp("heuristic", size=9, seed=0)
    server, base = _serve(app)
    yield app, Client(base)
    server.shutdown()
    server.server_close()


def test_a_client_gone_before_its_answer_is_no_error_of_the_server(capsys):
    """A browser that navigates away, or a script that reads the status line only, closes
    its connection while the answer is written: the server says nothing of it (it printed
    a traceback); any other error of a request is printed as before."""
    app = PlayApp("random", size=9, seed=0)
    server = make_server(app, "127.0.0.1", 0)
    try:
        for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise gone
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 40694))
        assert capsys.readouterr().err == ""
        try:
            raise RuntimeError("a fault of the server")
        except RuntimeError:
            server.handle_error(None, ("127.0.0.1", 40694))
        err = capsys.readouterr().err
        assert "Traceback" in err and "RuntimeError: a fault of the server" in err
    finally:
        server.server_close()


@pytest.fixture(scope="module")
def gjx(tmp_path_factory):
    """A tiny exported search agent for 5x5 four-in-a-row (Gumbel, 8 simulations)."""
    env = Gomoku(5, 4, observation="stones-colour")
    module = networks.make_network("simplenet", board_size=5, channels=(4, 4), value_hidden=8)
    variables = networks.init_network(module, jax.random.key(3), env.observation_shape)
    meta = {"agent": "search",
            "game": {"size": 5, "k": 4, "rule": "freestyle", "observation": "stones-colour"},
            "network": {"name": "simplenet", "options": {"channels": [4, 4], "value_hidden": 8}},
            "search": search_lib.SearchConfig("gumbel", 8, max_num_considered_actions=8).to_dict()}
    path = tmp_path_factory.mktemp("gjx") / "tiny.gjx"
    gio.write_exported(path, meta, jax.device_get(variables))
    return str(path)


def _stones(state):
    return int((np.asarray(state["board"]) != 0).sum())


# ------------------------------------------------------------------ the API
def test_page_and_its_files_are_served(served):
    _, client = served
    for path, needle in (("/", b"<title>gomoku-jax"), ("/app.js", b"/api/move"),
                         ("/style.css", b".cell")):
        with urllib.request.urlopen(client.base + path) as response:
            assert response.status == 200 and needle in response.read()
    status, body = client.get("/api/agents")
    assert status == 200 and "heuristic" in body["baselines"]
    assert body["rules"] == ["freestyle", "standard"] and body["sizes"] == [3, 19]
    assert client.get("/nope")[0] == 404 and client.post("/api/nope")[0] == 404


def test_new_game_move_reply_and_undo(served):
    _, client = served
    status, state = client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    assert status == 200
    assert state["game"]["size"] == 9 and state["turn"] == "human" and state["to_move"] == "black"
    assert _stones(state) == 0 and not state["can_undo"] and state["agent"]["budget"] is None

    status, state = client.post("/api/move", {"row": 4, "col": 3})
    assert status == 200 and state["board"][4][3] == 1  # black stone where we clicked
    assert state["last_move"] == [4, 3] and state["turn"] == "agent" and state["to_move"] == "white"

    status, state = client.post("/api/reply")
    assert status == 200 and state["turn"] == "human" and state["move_count"] == 2
    r, c = state["last_move"]
    assert state["board"][r][c] == 2 and state["movers"] == ["human", "agent"]
    assert state["moves"] == [[4, 3], [r, c]]
    assert state["analysis"] is None  # the heuristic has no policy to show

    status, state = client.post("/api/undo")
    assert status == 200 and _stones(state) == 0 and state["moves"] == []
    assert not state["can_undo"] and state["last_move"] is None
    status, body = client.post("/api/undo")
    assert status == 400 and "nothing to undo" in body["error"]


def test_a_new_game_keeps_what_the_request_leaves_out(served):
    _, client = served
    _, state = client.post("/api/new", {"colour": "white", "agent": "pure-mcts-10",
                                        "budget": 12})
    assert state["agent"]["name"] == "pure-mcts-12" and state["human"] == "white"
    _, state = client.post("/api/new", {})  # the same agent, budget and colour
    assert state["agent"]["name"] == "pure-mcts-12" and state["human"] == "white"
    _, state = client.post("/api/new", {"colour": "black"})
    assert state["agent"]["name"] == "pure-mcts-12" and state["human"] == "black"
    _, state = client.post("/api/new", {"agent": "pure-mcts-10"})  # its own budget
    assert state["agent"]["name"] == "pure-mcts-10" and state["human"] == "black"
    _, state = client.post("/api/new", {"agent": "random"})
    assert state["agent"]["name"] == "random" and state["agent"]["budget"] is None


def test_playing_white_the_agent_opens(served):
    _, client = served
    status, state = client.post("/api/new", {"colour": "white", "agent": "heuristic"})
    assert status == 200 and state["turn"] == "agent" and state["human"] == "white"
    status, body = client.post("/api/move", {"row": 0, "col": 0})
    assert status == 400 and "agent's turn" in body["error"]
    status, state = client.post("/api/reply")
    assert status == 200 and _stones(state) == 1 and state["turn"] == "human"
    r, c = state["last_move"]
    assert state["board"][r][c] == 1  # the agent plays black
    status, body = client.post("/api/reply")
    assert status == 400 and "your turn" in body["error"]
    # Undo takes back our move and the agent's reply, never the agent's opening.
    client.post("/api/move", {"row": 0, "col": 0})
    client.post("/api/reply")
    status, state = client.post("/api/undo")
    assert status == 200 and _stones(state) == 1 and state["moves"] == [[r, c]]


@pytest.mark.parametrize("move, problem", [
    ({"row": 9, "col": 0}, "off the 9x9 board"),
    ({"row": -1, "col": 2}, "off the 9x9 board"),
    ({"row": 4, "col": 4}, "occupied by black"),
    ({"row": "4", "col": 1}, "row must be an integer, got \"4\""),
    ({"row": True, "col": 1}, "row must be an integer, got true"),
    ({"row": 1}, "the move request has no col"),
    ({"row": 1, "col": None}, "col must be an integer, got null"),
    ({"row": 1, "col": 1, "colour": "white"}, "unknown field(s) ['colour']"),
])
def test_an_illegal_move_is_refused_and_changes_nothing(served, move, problem):
    _, client = served
    client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    client.post("/api/move", {"row": 4, "col": 4})
    client.post("/api/reply")
    before = client.get("/api/state")[1]
    status, body = client.post("/api/move", move)
    assert status == 400 and problem in body["error"], body
    assert client.get("/api/state")[1] == before


@pytest.mark.parametrize("path, raw, problem", [
    ("/api/move", b"{row: 1}", "not valid JSON"),
    ("/api/move", b"\xff\xfe", "not valid JSON"),
    ("/api/move", b"[1, 2]", "must be a JSON object, got list"),
    ("/api/new", b'{"colour": "red"}', "colour must be \"black\" or \"white\", got \"red\""),
    ("/api/new", b'{"colour": ["black"]}', 'colour must be "black" or "white", got ["black"]'),
    ("/api/new", b'{"colour": {"a": 1}}', 'colour must be "black" or "white", got {"a": 1}'),
    ("/api/new", b'{"agent": "nobody"}', "unknown agent 'nobody'"),
    ("/api/new", b'{"agent": ""}', "agent must be a non-empty string"),
    ("/api/new", b'{"agent": "random", "budget": 10}', "has no search budget"),
    ("/api/new", b'{"agent": "pure-mcts-10", "budget": 0}', "budget must be an integer"),
    ("/api/new", b'{"agent": "pure-mcts-10", "budget": "many"}', "budget must be an integer"),
    ("/api/new", b'{"agent": "pure-mcts-' + b"9" * 5000 + b'"}',
     "its number of 5000 digits is far too large"),  # more than int() reads
    ("/api/new", b'{"agent": "gomokubot-' + b"9" * 5000 + b'"}',
     "its number of 5000 digits is far too large"),
    ("/api/new", b'{"agent": "pure-mcts-10", "budget": ' + b"9" * 4000 + b"}",
     "budget must be an integer from 1 to"),  # its 4,000 digits are not echoed (below)
    ("/api/new", b'{"agent": "pure-mcts-10", "budget": ' + b"9" * 5000 + b"}",
     "not valid JSON"),
    ("/api/new", b'{"agent": "pure-mcts-10", "budget": true}',
     "budget must be an integer from 1 to 20000 or null, got true"),  # as JSON spells it
    ("/api/new", b'{"agent": "pure-mcts-10", "budget": "50"}', 'or null, got "50"'),
    ("/api/new", b'{"game": {"size": 40}}', "game: "),
    ("/api/new", b'{"game": {"rule": "renju"}}', "game.rule must be one of"),
    ("/api/new", b'{"seed": 3}', "unknown field(s) ['seed']"),
    ("/api/undo", b'{"steps": 2}', "unknown field(s) ['steps']"),
])
def test_a_malformed_request_gets_400_naming_the_problem(served, path, raw, problem):
    _, client = served
    client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    client.post("/api/move", {"row": 2, "col": 2})
    before = client.get("/api/state")[1]
    status, body = client.post(path, raw=raw)
    assert status == 400 and problem in body["error"] and len(body["error"]) < 400, body
    assert client.get("/api/state")[1] == before


def test_agent_info_refuses_a_budget_that_is_not_a_readable_number(served):
    _, client = served
    for budget, problem in (("many", "budget must be an integer, got 'many'"),
                            ("9" * 5000, "budget '999"),
                            ("9" * 5000, "of 5000 digits is far too large")):
        status, body = client.get(f"/api/agent-info?name=pure-mcts-7&budget={budget}")
        assert status == 400 and problem in body["error"] and len(body["error"]) < 200, body
    status, body = client.get("/api/agent-info?name=pure-mcts-7&budget=0012")
    assert status == 200 and body["name"] == "pure-mcts-12"
    for query in ("", "?name=", "?budget=3"):  # the name is the query's own parameter
        status, body = client.get(f"/api/agent-info{query}")
        assert status == 400 and body["error"] == (
            "agent-info needs the agent's name: /api/agent-info?name=AGENT"), body


def test_an_api_path_asked_with_the_other_method_gets_405_saying_which(served):
    _, client = served
    before = client.get("/api/state")[1]
    for method, path, takes in (("GET", "/api/move", "POST with a JSON body"),
                                ("GET", "/api/undo", "POST with a JSON body"),
                                ("POST", "/api/state", "GET"), ("POST", "/", "GET")):
        port = _port(client)
        status, body = _raw(client.base, method, path, {"Host": f"127.0.0.1:{port}",
                                                       "Content-Type": "application/json"},
                            b"{}" if method == "POST" else None)
        assert (status, body) == (405, {"error": f"{path} takes {takes}"})  # was 404
    assert client.get("/nowhere") == (404, {"error": "no such page '/nowhere'"})
    assert client.get("/api/state")[1] == before


def test_a_method_the_server_does_not_take_gets_json_naming_it(served):
    """PUT, DELETE and the like are answered as every other request is, in JSON (they
    got the standard library's HTML page), and change nothing; a HEAD gets the status
    and headers only."""
    _, client = served
    before = client.get("/api/state")[1]
    host = {"Host": f"127.0.0.1:{_port(client)}"}
    for method in ("PUT", "DELETE", "PATCH"):
        status, body = _raw(client.base, method, "/api/undo",
                            {**host, "Content-Type": "application/json"}, b"{}")
        assert (status, body) == (501, {"error": f"this server takes GET and POST, not "
                                                 f"'{method}'; nothing was changed"})
    connection = http.client.HTTPConnection("127.0.0.1", _port(client), timeout=120)
    try:
        connection.request("HEAD", "/api/state")
        response = connection.getresponse()
        assert response.status == 501 and response.read() == b""
        assert response.getheader("Content-Type") == "application/json"
    finally:
        connection.close()
    assert client.get("/api/state")[1] == before


def test_json_nested_too_deeply_gets_400_not_500(served):
    _, client = served
    client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    client.post("/api/move", {"row": 2, "col": 2})
    before = client.get("/api/state")[1]
    deep = 5000  # json.loads raises RecursionError
    for path, raw in (("/api/move", b"[" * deep + b"]" * deep),
                      ("/api/new", b'{"agent": ' + b"[" * deep + b"]" * deep + b"}"),
                      ("/api/move", b'{"row": ' + b"[" * 900 + b"]" * 900 + b', "col": 1}'),
                      ("/api/move", b'{"row": ' + b"{\"a\": " * 17 + b"1" + b"}" * 17 + b"}")):
        status, body = client.post(path, raw=raw)
        assert status == 400, (path, raw[:40], body)
        assert body["error"] == ("the request body is not valid JSON: it nests arrays or "
                                 "objects too deeply (at most 16 levels)")
    status, body = client.post("/api/move", {"row": [[[[1]]]], "col": 1})  # not too deep
    assert status == 400 and body["error"] == "row must be an integer, got [[[[1]]]]"
    assert client.get("/api/state")[1] == before


def test_a_body_with_a_key_twice_gets_400(served):
    _, client = served
    client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    before = client.get("/api/state")[1]
    status, body = client.post("/api/move", raw=b'{"row": 2, "col": 2, "row": 3}')
    assert status == 400 and body["error"] == (
        "the request body is not valid JSON (the key 'row' appears twice in one object "
        "(beside 'col'), the second time at line 1 column 22; give it once)")
    assert client.get("/api/state")[1] == before


def test_a_chunked_body_is_refused_and_the_game_kept(served):
    """A body sent without a Content-Length (chunked) used to be read as none: a new-game
    request then started a game of the old settings, dropping the current one."""
    server, client = served
    client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    client.post("/api/move", {"row": 2, "col": 2})
    before = client.get("/api/state")[1]
    headers = {**_own_headers(_port(client)), "Transfer-Encoding": "chunked"}
    body = b'{"colour": "white", "agent": "random"}'
    status, reply = _raw(client.base, "POST", "/api/new", headers,
                         b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body), length=False)
    assert status == 400 and reply["error"].startswith(
        "the request body must come with a Content-Length")
    assert client.get("/api/state")[1] == before


# ------------------------------------------------------------- other web pages
def _own_headers(port, origin=True):
    """The headers of the page's own POSTs (app.js `api`): Chromium adds Origin to a
    same-origin POST and Sec-Fetch-Site to every request."""
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
               "Sec-Fetch-Site": "same-origin"}
    return {**headers, "Origin": f"http://127.0.0.1:{port}"} if origin else headers


def _a_game_to_spoil(client):
    """A game in progress, and its state: a refused request must leave it as it is."""
    client.post("/api/new", {"colour": "black", "agent": "heuristic"})
    client.post("/api/move", {"row": 3, "col": 3})
    client.post("/api/reply")
    return client.get("/api/state")[1]


def test_the_request_from_another_site_in_the_report_is_refused(served):
    _, client = served
    before = _a_game_to_spoil(client)
    status, body = _raw(client.base, "POST", "/api/new", {
        "Content-Type": "text/plain", "Origin": "http://evil.example",
        "Host": "evil.example:80"}, b'{"agent":"pure-mcts-3","colour":"white"}')
    assert status == 403, body
    assert "got Host 'evil.example:80'" in body["error"] and "DNS rebinding" in body["error"]
    assert client.get("/api/state")[1] == before


@pytest.mark.parametrize("kind", [
    None, "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x", "application/jsonx", "text/json", ""])
def test_a_post_that_is_not_declared_json_gets_415(served, kind):
    _, client = served
    before = _a_game_to_spoil(client)
    port = _port(client)
    headers = {k: v for k, v in _own_headers(port).items() if k != "Content-Type"}
    if kind is not None:
        headers["Content-Type"] = kind
    for path, raw in (("/api/new", b'{"agent": "pure-mcts-3", "colour": "white"}'),
                      ("/api/move", b'{"row": 0, "col": 0}'), ("/api/undo", b"{}"),
                      ("/api/reply", None)):
        status, body = _raw(client.base, "POST", path, headers, raw)
        assert status == 415, (path, body)
        got = "none" if kind is None else f"Content-Type {kind!r}"
        assert body["error"] == ("a POST request must send JSON with the header Content-Type: "
                                 f"application/json, got {got}")
    assert client.get("/api/state")[1] == before


@pytest.mark.parametrize("host", [
    "evil.example:{port}", "evil.example", "evil.example:80",
    "localhost.evil.example:{port}", "127.0.0.1.evil.example:{port}",
    "127.0.0.2:{port}", "user@127.0.0.1:{port}", "127.0.0.1:{port}/x", "127.0.0.1:{port}:1",
    "[::2]:{port}", "192.168.1.10:{port}", "", None])
def test_a_request_addressed_to_another_host_gets_403(served, host):
    _, client = served
    before = _a_game_to_spoil(client)
    port = _port(client)
    headers = {k: v for k, v in _own_headers(port, origin=False).items() if k != "Host"}
    if host is not None:
        headers["Host"] = host.format(port=port, other=port + 1 if port < 65535 else 1)
    got = "no Host header" if host is None else f"Host {headers['Host']!r}"
    for method, path, raw in (("GET", "/api/state", None), ("GET", "/", None),
                              ("GET", "/api/agent-info?name=pure-mcts-7", None),
                              ("POST", "/api/new", b'{"colour": "white"}'),
                              ("POST", "/api/move", b'{"row": 0, "col": 0}'),
                              ("POST", "/api/nope", b"{}")):
        status, body = _raw(client.base, method, path, headers, raw)
        assert status == 403, (method, path, body)
        assert body["error"] == (
            f"this server answers only requests addressed to it (http://127.0.0.1:{port}, "
            f"http://localhost:{port}, http://[::1]:{port}), got {got}: open the page at one "
            "of those addresses (another name pointing here is refused, against DNS rebinding)")
    assert client.get("/api/state")[1] == before


def test_two_host_headers_get_403(served):
    _, client = served
    port = _port(client)
    status, body = _raw(client.base, "GET", "/api/state",
                        {"Host": f"127.0.0.1:{port}", "host": "evil.example"})
    assert status == 403 and "got 2 Host headers" in body["error"]


@pytest.mark.parametrize("origin", [
    "http://evil.example", "null", "https://127.0.0.1:{port}",
    "http://localhost:{port}.evil.example", "http://evil.example:{port}",
    "file://", "http://127.0.0.1:{port}/", "ws://127.0.0.1:{port}", ""])
def test_a_request_from_another_origin_gets_403(served, origin):
    _, client = served
    before = _a_game_to_spoil(client)
    port = _port(client)
    origin = origin.format(port=port, other=port + 1 if port < 65535 else 1)
    headers = {**_own_headers(port), "Origin": origin}
    for method, path, raw in (("GET", "/api/state", None), ("GET", "/", None),
                              ("POST", "/api/new", b'{"colour": "white"}'),
                              ("POST", "/api/move", b'{"row": 0, "col": 0}')):
        status, body = _raw(client.base, method, path, headers, raw)
        assert status == 403, (method, path, body)
        assert body["error"] == (
            f"requests from other web pages are refused: Origin {origin!r} is not this "
            f"server's (http://127.0.0.1:{port}, http://localhost:{port}, http://[::1]:{port})")
    assert client.get("/api/state")[1] == before


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_another_site_may_link_to_the_page_but_not_use_the_api(served, site):
    _, client = served
    before = _a_game_to_spoil(client)
    port = _port(client)
    headers = {**_own_headers(port, origin=False), "Sec-Fetch-Site": site}
    for method, path in (("GET", "/api/state"), ("GET", "/api/agents"),
                         ("GET", "/api/agent-info?name=pure-mcts-7"), ("POST", "/api/undo")):
        status, body = _raw(client.base, method, path, headers, b"{}" if method == "POST"
                            else None)
        assert status == 403, (method, path, body)
        assert body["error"] == (f"requests from other web pages are refused: Sec-Fetch-Site "
                                 f"{site!r} (the page's own requests are same-origin)")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("GET", "/", headers={"Host": f"localhost:{port}", "Sec-Fetch-Site": site})
    response = connection.getresponse()  # a link from another site opens the page
    assert response.status == 200 and b"<title>gomoku-jax" in response.read()
    connection.close()
    assert client.get("/api/state")[1] == before


def test_the_pages_own_requests_are_accepted(served):
    _, client = served
    port = _port(client)
    own = _own_headers(port)
    status, state = _raw(client.base, "POST", "/api/new", own,
                         b'{"colour": "black", "agent": "heuristic"}')
    assert status == 200 and state["move_count"] == 0
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}",
                 f"[::1]:{port}"):
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}",
                       f"http://[::1]:{port}"):
            headers = {**own, "Host": host, "Origin": origin,
                       "Content-Type": "application/json; charset=UTF-8"}
            assert _raw(client.base, "POST", "/api/analyse", headers, b"{}")[0] == 200
    status, state = _raw(client.base, "POST", "/api/move", own, b'{"row": 1, "col": 2}')
    assert status == 200 and state["board"][1][2] == 1
    status, state = _raw(client.base, "POST", "/api/reply", own, b"{}")
    assert status == 200 and state["move_count"] == 2
    status, state = _raw(client.base, "POST", "/api/undo", own, b"{}")
    assert status == 200 and state["move_count"] == 0
    gets = {k: v for k, v in own.items() if k not in ("Origin", "Content-Type")}
    for path in ("/api/state", "/api/agents", "/api/agent-info?name=pure-mcts-7"):
        assert _raw(client.base, "GET", path, gets)[0] == 200
        assert _raw(client.base, "GET", path, {**gets, "Sec-Fetch-Site": "none"})[0] == 200
    # Every POST of the page sends a JSON body, so `api` sends Content-Type: application/json.
    script = (ROOT / "gomoku_jax" / "web" / "app.js").read_text()
    posts = re.findall(r'api\("POST", "[^"]+"(, [^)]+)?\)', script)
    assert len(posts) == 5 and all(posts), posts
    assert 'options.headers["Content-Type"] = "application/json"' in script


def test_a_server_bound_elsewhere_answers_to_that_host():
    app = PlayApp("heuristic", size=9, seed=0)
    for told, accepted, refused in (
            ("localhost", ["localhost", "127.0.0.1", "[::1]"], ["evil.example", "10.1.2.3"]),
            ("0.0.0.0", ["0.0.0.0", "127.0.0.1", "10.1.2.3", "[fe80::1]", "localhost"],
             ["evil.example", "localhost.evil.example"])):
        server = make_server(app, told, 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        base = f"http://127.0.0.1:{port}"
        try:
            for host in accepted:
                headers = {"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}"}
                assert _raw(base, "GET", "/api/state", headers)[0] == 200, (told, host)
            for host in refused:
                status, body = _raw(base, "GET", "/api/state", {"Host": f"{host}:{port}"})
                assert status == 403 and "DNS rebinding" in body["error"], (told, host)
                status, body = _raw(base, "GET", "/api/state", {
                    "Host": f"127.0.0.1:{port}", "Origin": f"http://{host}:{port}"})
                assert status == 403 and "Origin" in body["error"], (told, host)
        finally:
            server.shutdown()
            server.server_close()


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_a_server_bound_to_an_ipv6_address_listens_there():
    from gomoku_jax.play import url_of

    app = PlayApp("heuristic", size=9, seed=0)
    for told in ("::1", "[::1]"):
        server = make_server(app, told, 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            port = server.server_address[1]
            assert url_of(server) == f"http://[::1]:{port}/"
            status, state = Client(url_of(server).rstrip("/")).get("/api/state")
            assert status == 200 and state["game"]["size"] == 9
            status, body = _raw(f"http://[::1]:{port}", "GET", "/api/state",
                                {"Host": f"evil.example:{port}"})
            assert status == 403 and "DNS rebinding" in body["error"]
            with pytest.raises(ValueError, match=rf"cannot listen on \[::1\]:{port} \("):
                make_server(app, told, port)  # taken
        finally:
            server.shutdown()
            server.server_close()
    server = make_server(app, "::", 0)  # every interface: IPv4 clients too
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        for base in (f"http://127.0.0.1:{port}", f"http://[::1]:{port}"):
            assert Client(base).get("/api/state")[0] == 200, base
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("address, shown", [
    (("127.0.0.1", 8000), "http://127.0.0.1:8000/"),
    (("0.0.0.0", 8000), "http://127.0.0.1:8000/"),
    (("::", 8000, 0, 0), "http://[::1]:8000/"),
    (("fe80::1%eth0", 8000, 0, 2), "http://[fe80::1%25eth0]:8000/"),  # RFC 6874
])
def test_url_of_writes_hosts_as_a_browser_reads_them(address, shown):
    from types import SimpleNamespace

    from gomoku_jax.play import url_of

    assert url_of(SimpleNamespace(server_address=address)) == shown


@pytest.mark.parametrize("told, shown, elsewhere", [
    ("127.0.0.1", "http://127.0.0.1:{port}/", False),
    ("0.0.0.0", "http://127.0.0.1:{port}/", True),  # a URL a browser here opens
])
def test_serve_prints_the_address_to_open(monkeypatch, capsys, told, shown, elsewhere):
    import socketserver

    from gomoku_jax import play

    ports = []

    def stop_at_once(server, *args, **kwargs):  # as after Ctrl-C
        ports.append(server.server_address[1])
        raise KeyboardInterrupt

    monkeypatch.setattr(socketserver.BaseServer, "serve_forever", stop_at_once)
    play.serve(PlayApp("heuristic", size=9, seed=0), told, 0)
    out = capsys.readouterr().out
    assert f"open {shown.format(port=ports[0])}" in out, out
    assert ("from another machine" in out) == elsewhere, out


def test_the_player_cache_keeps_the_most_recently_used(monkeypatch):
    from gomoku_jax import play

    monkeypatch.setattr(play, "MAX_PLAYERS", 3)
    app = PlayApp("heuristic", size=9, seed=0)
    env = app._env_now
    first = app.player("pure-mcts-1", None, env)
    for n in (2, 3):
        app.player(f"pure-mcts-{n}", None, env)
    assert app.player("pure-mcts-1", None, env) is first  # used again: kept
    app.player("pure-mcts-4", None, env)  # the least recently used (heuristic) goes
    assert [key[1] for key in app._players] == ["pure-mcts-3", "pure-mcts-1", "pure-mcts-4"]
    assert app._player_and_default("pure-mcts-1", None, env)[1] == 1  # its own budget, kept
    app.player("pure-mcts-5", None, env)
    assert app.player("pure-mcts-1", None, env) is first
    assert app.player("pure-mcts-3", None, env) is not None  # built again
    assert len(app._players) == 3
    app.move({"row": 4, "col": 4})  # the game's own player, evicted, still plays
    board = np.array(app.reply()["board"])
    assert (board != 0).sum() == 2 and board[4, 4] != 0


def test_a_game_to_its_end_then_moves_are_refused(served):
    _, client = served
    _, state = client.post("/api/new", {"colour": "black", "agent": "random"})
    while not state["over"]:  # we play the first empty point, row by row
        r, c = next((r, c) for r in range(9) for c in range(9) if state["board"][r][c] == 0)
        _, state = client.post("/api/move", {"row": r, "col": c})
        if not state["over"]:
            _, state = client.post("/api/reply")
    assert state["turn"] is None and state["to_move"] is None
    assert state["result"] in ("black wins", "white wins", "draw")
    if state["winner"] is not None:
        stone = 1 if state["winner"] == "black" else 2
        line = state["win_line"]
        assert len(line) >= 5 and list(state["last_move"]) in line
        assert all(state["board"][r][c] == stone for r, c in line)
    status, body = client.post("/api/move", {"row": 0, "col": 0})
    assert status == 400 and f"the game is over ({state['result']})" in body["error"]
    assert client.post("/api/reply")[0] == 400 and client.post("/api/analyse")[0] == 400
    status, after = client.post("/api/undo")  # undo reopens the game
    assert status == 200 and not after["over"] and after["turn"] == "human"


def test_win_line_by_hand():
    board = np.zeros((7, 7), np.int8)
    for i in range(1, 6):
        board[i, 6 - i] = 1  # an anti-diagonal five: (1, 5) ... (5, 1)
    board[0, 0] = 2
    assert _win_line(board, 3 * 7 + 3, 5, "freestyle") == [[1, 5], [2, 4], [3, 3], [4, 2], [5, 1]]
    board[6, 0] = 1  # a six: wins in freestyle, not in the standard rule
    assert len(_win_line(board, 6 * 7 + 0, 5, "freestyle")) == 6
    assert _win_line(board, 6 * 7 + 0, 5, "standard") == []
    assert _win_line(board, 0, 5, "freestyle") == []  # a lone white stone


def test_cli_play_reports_bad_settings_in_one_line(served, capsys):
    from gomoku_jax import cli

    assert cli.main(["play", "--agent", "nobody"]) == 2
    assert "unknown agent 'nobody'" in capsys.readouterr().err
    app, client = served
    port = int(client.base.rsplit(":", 1)[1])  # taken by the test server
    assert cli.main(["play", "--port", str(port), "--size", "9"]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "try another --port" in err
    # an address this machine does not have, a name nobody knows: the host, not the port
    for host in ("999.1.1.1", "192.0.2.1"):  # not an address; TEST-NET-1, not ours
        assert cli.main(["play", "--host", host, "--port", "0", "--size", "9"]) == 2
        err = capsys.readouterr().err
        assert f"cannot listen on {host}:0" in err and "--host must be an address or a " \
            "name of this machine" in err and "--port" not in err, err


# ------------------------------------------------------ budgets, overlay, cache
def test_agent_info_budgets_and_the_cache():
    app = PlayApp("random", size=7, k=4, seed=1)
    assert app.agent_info("random")["budget"] is None
    info = app.agent_info("pure-mcts-30")
    assert info["budget"] == {"kind": "simulations", "default": 30, "value": 30} and info["overlay"]
    assert app.agent_info("pure-mcts-30", 12)["name"] == "pure-mcts-12"
    assert not app.agent_info("heuristic+killer")["overlay"]
    with pytest.raises(PlayError, match="unknown agent"):
        app.agent_info("alphabeta-x")
    with pytest.raises(PlayError, match=r"agent 'pure-mcts-9+\.\.\.: its number of 5000 digits"):
        app.agent_info("pure-mcts-" + "9" * 5000)
    env = Gomoku(7, 4)
    first = app.player("pure-mcts-30", 12, env)
    assert app.player("pure-mcts-30", 12, env) is first  # built (and compiled) once
    assert app.player(" pure-mcts-30 ", 12, env) is not app.player("pure-mcts-30", None, env)


def test_uct_takes_a_budget_and_plays_as_its_agent():
    """``uct-N`` (plain UCT) takes a budget like ``pure-mcts-N``, and its overlay's move is
    the move of ``agents.make("uct-N")``: no solver, no decisive expansion."""
    from gomoku_jax import agents

    app = PlayApp("random", size=7, k=4, seed=1)
    info = app.agent_info("uct-30")
    assert info["budget"] == {"kind": "simulations", "default": 30, "value": 30} and info["overlay"]
    assert app.agent_info("uct-30", 12)["name"] == "uct-12"
    with pytest.raises(PlayError, match=r"\(uct-N\+killer\), not in"):
        app.player("uct-30+killer", 12, Gomoku(7, 4))
    env = Gomoku(7, 4)
    win = env.play_moves([(3, 1), (0, 0), (3, 2), (0, 6), (3, 3), (6, 0)])  # (3, 0) or (3, 4)
    agent = agents.make("uct-12", env)
    moves = {}
    for name in ("uct-12", "pure-mcts-12"):
        player = app.player(name, None, env)
        moves[name] = [player.analyse(jax.random.key(seed), win)[0] for seed in range(3)]
    assert moves["uct-12"] == [agent.act(win, jax.random.key(seed)) for seed in range(3)]
    # pure MCTS's solver takes a win in one; plain UCT's 12 simulations need not find it
    wins = {3 * 7 + 0, 3 * 7 + 4}
    assert set(moves["pure-mcts-12"]) <= wins and not set(moves["uct-12"]) <= wins


def test_pure_mcts_reply_carries_its_analysis():
    app = PlayApp("pure-mcts-40", size=7, k=4, colour="white", seed=2)
    state = app.reply()
    analysis = state["analysis"]
    assert analysis["kind"] == "mcts" and analysis["move"] == state["last_move"]
    assert analysis["position"] == 0 and -1 <= analysis["value"] <= 1
    heat = np.asarray(analysis["heat"])
    assert heat.shape == (7, 7) and abs(heat.sum() - 1) < 1e-3
    assert heat[tuple(analysis["move"])] == heat.max()  # it plays its most visited move
    assert analysis["to_move"] == "agent" and "for the player to move" in analysis[
        "value_label"]
    assert app.analyse()["analysis"]["to_move"] == "human"  # its view of the human's turn
    mine = (3, 3) if state["last_move"] != [3, 3] else (3, 2)
    app.move({"row": mine[0], "col": mine[1]})
    looked = app.analyse()["analysis"]
    assert looked["to_move"] == "agent"
    looked = np.asarray(looked["heat"])
    assert looked[mine] == 0 and looked[tuple(state["last_move"])] == 0  # occupied: nothing
    assert abs(looked.sum() - 1) < 1e-3
    assert app.snapshot()["move_count"] == 2  # analysing changes nothing


def test_exported_agent_brings_its_game_and_plays_as_load_agent(gjx):
    app = PlayApp("heuristic", size=9, seed=0)
    state = app.new_game({"agent": gjx, "colour": "white"})
    assert state["game"]["size"] == 5 and state["game"]["k"] == 4  # the file's game
    assert state["agent"]["name"] == gjx + "@8" and state["agent"]["budget"]["default"] == 8
    state = app.new_game({"agent": gjx, "budget": 6, "colour": "white"})
    # the budget asked for plays; the agent's own stays the file's
    assert state["agent"]["name"] == gjx + "@6"
    assert state["agent"]["budget"] == {"kind": "simulations", "default": 8, "value": 6}
    assert app.agent_info(gjx, 6)["budget"] == {"kind": "simulations", "default": 8, "value": 6}
    state = app.new_game({"agent": gjx + "@4", "budget": 6, "colour": "white"})
    assert state["agent"]["name"] == gjx + "@6"
    assert state["agent"]["budget"] == {"kind": "simulations", "default": 4, "value": 6}
    state = app.reply()
    analysis = state["analysis"]
    assert analysis["kind"] == "search" and analysis["move"] == state["last_move"]
    heat = np.asarray(analysis["heat"])
    assert abs(heat.sum() - 1) < 1e-3 and abs(np.asarray(analysis["prior"]).sum() - 1) < 1e-3
    with pytest.raises(PlayError, match="was trained for 5x5 k=4"):
        app.new_game({"agent": gjx, "game": {"size": 9, "k": 5}})
    # the page locks its board fields to a file's game, and only to a file's
    for name, own in ((gjx, True), (gjx + "@4", True), (gjx + "+killer", True),
                      ("heuristic", False), ("pure-mcts-5", False)):
        info = app.agent_info(name)
        assert info["own_game"] is own, name
        assert (info["game"]["size"], info["game"]["k"]) == (5, 4), name  # the game now
    # The overlay's move is the move of the file's agent (`exported.load_agent`).
    env = exported.load(gjx).env
    player = app.player(gjx + "@4", 6, Gomoku(5, 4))  # the cached player that just moved
    agent = exported.load_agent(gjx, simulations=6)
    assert agent.name == gjx + "@6"  # as the command line names it
    assert exported.load_agent(gjx).name == gjx
    game = env.play_moves([(2, 2), (1, 1), (2, 3)])
    for seed in range(3):
        key = jax.random.key(seed)
        action, _ = player.analyse(key, game)
        assert action == agent.act(game, key)


def test_a_q_network_is_refused_a_budget_with_or_without_the_killer(tmp_path):
    module = networks.make_network("resnet-q", board_size=5, blocks=1, filters=4, hidden=8)
    variables = networks.init_network(module, jax.random.key(0), (5, 5, 3))
    q = str(tmp_path / "q.gjx")
    gio.write_exported(q, {"agent": "q-greedy", "network": {
        "name": "resnet-q", "options": {"blocks": 1, "filters": 4, "hidden": 8}},
        "game": {"size": 5, "k": 5, "rule": "freestyle", "observation": "stones-colour"}},
        jax.device_get(variables))
    app = PlayApp("random", size=5, k=5, seed=0)
    env = Gomoku(5, 5)
    assert app.player(q + "+killer", None, env).budget is None  # it plays, without budget
    for name in (q, q + "+killer"):  # not "its budget in its name": a Q network takes none
        with pytest.raises(PlayError, match=rf"^{re.escape(q)} holds a Q network, which plays "
                                            r"without search: it takes no budget; leave out "
                                            r"--simulations$"):
            app.player(name, 5, env, "--simulations")
        with pytest.raises(PlayError, match=r"it takes no budget$"):
            app.player(name, 5, env)


# ------------------------------------------------------------- the browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _browser_or_skip():
    required = os.environ.get("GOMOKU_JAX_REQUIRE_BROWSER") == "1"
    why = None
    try:
        import selenium  # noqa: F401
    except ImportError:
        why = "selenium is not installed (pip install selenium)"
    if why is None and not (CHROMIUM and CHROMEDRIVER):
        why = "chromium and chromedriver are not on PATH (apt-get install chromium chromium-driver)"
    if why:
        if required:
            pytest.fail(f"GOMOKU_JAX_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)


def test_a_full_game_in_headless_chromium(gjx):
    _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    app = PlayApp("random", size=9, seed=5)
    server, base = _serve(app)
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    wait = WebDriverWait(driver, 60)

    def ready():  # the page waits for us (or the game is over)
        wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-over") == "true"
                   or not d.find_elements(By.CSS_SELECTOR, "svg.board-locked"))

    def stones():
        return len(driver.find_elements(By.CSS_SELECTOR, "circle.stone"))

    try:
        driver.get(base + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "rect.cell"))
        ready()
        assert len(driver.find_elements(By.CSS_SELECTOR, "rect.cell")) == 81
        assert "Your move (black)" in driver.find_element(By.ID, "status").text
        assert driver.find_element(By.ID, "budget").get_attribute("disabled") is not None
        # One move and the reply, then undo takes both back.
        driver.find_element(By.CSS_SELECTOR, 'rect.cell[data-row="4"][data-col="4"]').click()
        wait.until(lambda d: stones() == 2)
        ready()
        driver.find_element(By.ID, "undo").click()
        wait.until(lambda d: stones() == 0)
        ready()
        # Then a whole game: we click the first empty point, row by row.
        for _ in range(81):
            if driver.find_element(By.ID, "status").get_attribute("data-over") == "true":
                break
            target = driver.find_element(By.CSS_SELECTOR, "rect.cell:not(.occupied)")
            count = stones()
            target.click()
            wait.until(lambda d: stones() > count)
            ready()
        state = app.snapshot()
        assert state["over"]
        text = driver.find_element(By.ID, "status").text
        assert f"Game over, {state['result']}" in text
        assert stones() == state["move_count"]
        if state["winner"] is not None:
            assert driver.find_elements(By.CSS_SELECTOR, "line.win-line")
            assert ("you win" in text) == (state["winner"] == "black")
        artifacts = ROOT / "artifacts"
        artifacts.mkdir(exist_ok=True)
        shot = artifacts / "play_browser_game.png"
        shot.unlink(missing_ok=True)  # a picture from an earlier run proves nothing
        assert driver.save_screenshot(str(shot)), f"could not write {shot}"
        print(f"screenshot of the finished game: {shot}")
        assert shot.read_bytes().startswith(b"\x89PNG")

        # The board fields: another board for a new game, a file's game, and back.
        def field(name):
            return driver.find_element(By.ID, name)

        def board_fields():
            return [(field(n).get_attribute("value"), field(n).get_attribute("disabled") is None)
                    for n in ("size", "k", "rule")]

        def new_game(cells):
            field("new-game").click()
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "rect.cell")) == cells
                       and stones() == 0)
            ready()

        def choose_agent(name):
            field("agent").clear()
            field("agent").send_keys(name)
            field("colour").click()  # leaving the field asks the server about the agent

        assert board_fields() == [("9", True), ("5", True), ("freestyle", True)]
        for name, value in (("size", "7"), ("k", "4")):
            field(name).clear()
            field(name).send_keys(value)
        new_game(49)
        assert app.snapshot()["game"]["id"] == Gomoku(7, 4).id
        assert "7x7, 4 in a row" in field("game-id").text
        # A file's name and Enter at once: the game is the file's (the fields wait for
        # the server to describe the agent), shown locked.
        field("agent").clear()
        field("agent").send_keys(gjx + Keys.ENTER)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "rect.cell")) == 25)
        ready()
        assert app.snapshot()["agent"]["name"] == gjx + "@8"
        assert board_fields() == [("5", False), ("4", False), ("freestyle", False)]
        assert not field("error").text
        choose_agent("heuristic")  # free again, with the board chosen before the file
        wait.until(lambda d: board_fields() == [("7", True), ("4", True), ("freestyle", True)])
        field("size").clear()  # an empty size is the browser's to refuse: nothing is sent
        field("new-game").click()
        assert driver.execute_script('return document.getElementById("size").checkValidity()') \
            is False
        assert app.snapshot()["game"]["size"] == 5
        field("size").send_keys("9")
        field("k").clear()
        field("k").send_keys("5")
        new_game(81)
        assert app.snapshot()["game"]["id"] == Gomoku(9, 5).id
        assert app.snapshot()["agent"]["name"] == "heuristic"
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


def test_cli_play_speaks_of_simulations_not_of_the_api_budget(capsys):
    from gomoku_jax import cli

    for argv, text in ((["--agent", "heuristic", "--simulations", "100"],
                        "agent 'heuristic' has no search budget; leave out --simulations"),
                       (["--agent", "pure-mcts-10+killer", "--simulations", "5"],
                        "(pure-mcts-N+killer), not in --simulations"),
                       (["--agent", "pure-mcts-0"],  # the budget in the name
                        "agent 'pure-mcts-0': its N must be an integer from 1 to 20000, got 0")):
        assert cli.main(["play", "--size", "9", *argv]) == 2
        err = capsys.readouterr().err
        assert text in err and "budget null" not in err and "budget field" not in err, err
    # out of range (or not an integer) it is refused as it is read, with the usage
    for bad in ("0", "-3", "ten", "20001"):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["play", "--agent", "pure-mcts-10", "--simulations", bad])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "usage: gomoku-jax play" in err
        assert ("argument --simulations: must be an integer from 1 to 20000, "
                f"got '{bad}'") in err
    # the web API keeps its own words
    with pytest.raises(ValueError, match="has no search budget; send budget null"):
        PlayApp("heuristic", budget=100, size=9)


def test_a_failure_while_answering_a_get_is_a_json_500_and_the_server_goes_on(monkeypatch):
    app = PlayApp("heuristic", size=9, seed=0)
    server, base = _serve(app)
    try:
        client = Client(base)

        def broken():
            raise RuntimeError("a bug while answering")

        monkeypatch.setattr(app, "snapshot", broken)
        assert client.get("/api/state") == (500, {"error": "RuntimeError: a bug while answering"})
        monkeypatch.undo()
        status, state = client.get("/api/state")  # still serving
        assert status == 200 and state["moves"] == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_page_reached_through_another_port_is_served(served):
    """An ssh tunnel (``ssh -L 8000:localhost:PORT``) or a container's port mapping shows
    the server under another port: its names are accepted at any port."""
    _, client = served
    port = _port(client)
    for other in (port + 1 if port < 65535 else 1, 80, 8000):
        for name in ("127.0.0.1", "localhost"):
            address = name if other == 80 else f"{name}:{other}"
            headers = {"Host": address, "Origin": f"http://{address}",
                       "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
            assert _raw(client.base, "GET", "/api/state", headers)[0] == 200
            status, body = _raw(client.base, "POST", "/api/undo", headers, b"{}")
            assert status in (200, 400), body  # answered (nothing to undo is a 400)


# ------------------------------------------------------------ agents' answers, seeds
class _FirstEmpty(Agent):
    """Subclasses `Agent` itself (nothing turns its answer into an int): the first empty
    cell, as ``kind`` makes it (a NumPy integer, a bool, a float)."""

    def __init__(self, kind):
        self.name, self.kind = f"first-empty-{kind.__name__}", kind

    def act(self, state, key, deadline=None):
        return self.kind(int(np.flatnonzero(np.asarray(state.board).reshape(-1) == 0)[0]))


@pytest.fixture
def first_empty(registries):
    from gomoku_jax import agents

    kinds = {k.__name__: k for k in (np.int64, np.int32, bool, float)}
    agents.register_agent("first-empty-", lambda spec, env: _FirstEmpty(
        kinds[spec.removeprefix("first-empty-")]))


@pytest.mark.parametrize("kind", ["int64", "int32"])
def test_an_agent_answering_a_numpy_integer_plays_it(first_empty, kind):
    app = PlayApp(f"first-empty-{kind}", size=7, k=4, colour="white", seed=0)
    state = app.reply()
    assert not state["over"] and state["moves"] == [[0, 0]] and state["turn"] == "human"
    app.move({"row": 3, "col": 3})
    state = app.reply()
    assert state["moves"] == [[0, 0], [3, 3], [0, 1]] and not state["over"]
    assert all(type(x) is int for move in state["moves"] for x in move)
    json.dumps(state)  # what the API sends


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_an_agent_answering_a_bool_or_a_float_loses_at_once(first_empty, kind):
    app = PlayApp(f"first-empty-{kind}", size=7, k=4, colour="white", seed=0)
    state = app.reply()
    assert state["over"] and state["moves"] == [None] and state["winner"] == "white"
    assert state["result"] == "white wins (the opponent played an illegal move)"


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64, 1.5, True])
def test_a_seed_out_of_range_is_refused(seed):
    with pytest.raises(ValueError, match=re.escape(
            f"seed must be an integer from 0 to 4294967295, got {seed!r}")):
        PlayApp("random", size=7, k=4, seed=seed)
    assert PlayApp("random", size=7, k=4, seed=2**32 - 1).snapshot()["move_count"] == 0


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_the_play_command_stops_on_sigterm_and_ctrl_c_and_exits_normally(console, signame):
    """``gomoku-jax play`` serves until Ctrl-C or SIGTERM (``kill``, ``timeout``), then
    closes its server and exits with status 0 (SIGTERM used to end it with 143, silently)."""
    import signal
    import subprocess

    proc = subprocess.Popen([*console, "play", "--agent", "random", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, proc.kill)  # a child that never prints fails, not hangs
    watchdog.start()
    try:
        line = proc.stdout.readline()  # printed once the server listens
        address = re.search(r"open (http://127\.0\.0\.1:\d+/)", line)
        assert address, line
        with urllib.request.urlopen(address.group(1), timeout=30) as page:
            assert page.status == 200
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (proc.returncode, err[-2000:])
    assert "Traceback" not in err


def test_an_exported_agents_simulations_out_of_range_are_named_as_in_its_name(gjx, capsys):
    """``FILE.gjx@N`` with N above the page's largest budget: the error names the agent and
    its ``@N``, not a budget field the request (or command line) never had."""
    from gomoku_jax import cli

    app = PlayApp("heuristic", size=9, seed=0)
    with pytest.raises(PlayError, match=r"^agent '.*tiny\.gjx@99999': the simulations after "
                                        r"'@' must be an integer from 1 to 20000, got 99999$"):
        app.agent_info(gjx + "@99999")
    assert cli.main(["play", "--agent", gjx + "@99999+killer", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "tiny.gjx@99999': the simulations after '@' must be" in err and "budget" not in err


def test_game_fields_left_out_for_an_exported_agent_are_its_files(gjx):
    """``--k``, ``--rule`` or a request's partial ``game`` for an exported agent: the fields
    left out are the file's game (as ``--size``'s help says), not 15x15."""
    app = PlayApp(gjx, k=4, seed=0)  # the file's 5x5 board, k as asked
    assert (app.snapshot()["game"]["size"], app.snapshot()["game"]["k"]) == (5, 4)
    app = PlayApp("heuristic", size=9, seed=0)
    state = app.new_game({"agent": gjx, "game": {"rule": "freestyle"}})
    assert (state["game"]["size"], state["game"]["k"]) == (5, 4)
    with pytest.raises(PlayError, match=r"trained for 5x5 k=4 freestyle; this game is 5x5 "
                                        r"k=4 standard$"):
        app.new_game({"agent": gjx, "game": {"rule": "standard"}})


def test_an_exported_file_written_again_is_played_as_it_is_now(gjx, tmp_path):
    """A file exported again under the same name (a longer run, a newer export) is the
    agent a new game plays, not the network the cache built from it before."""
    path = str(tmp_path / "again.gjx")
    shutil.copyfile(gjx, path)
    app = PlayApp(path, colour="white", seed=0)
    before = np.asarray(app.reply()["analysis"]["prior"])
    meta, variables = gio.read_exported(path)
    gio.write_exported(path, meta, jax.tree.map(lambda x: x * 3.0 + 0.5, variables))
    app.new_game({})  # the same agent, read from the file as it is now
    after = np.asarray(app.reply()["analysis"]["prior"])
    assert not np.allclose(before, after)
    assert app.player(path, None, Gomoku(5, 4)) is app._player  # then cached as before


def test_a_network_whose_values_overflow_still_answers_json(gjx, tmp_path):
    """Finite params so large that the network's values overflow (NaN): the analysis says
    null for them, so the answer stays JSON a browser reads (``NaN`` is not JSON)."""
    meta, variables = gio.read_exported(gjx)
    path = str(tmp_path / "huge.gjx")
    gio.write_exported(path, meta, jax.tree.map(lambda x: np.asarray(x) * np.float32(1e20),
                                                variables))
    app = PlayApp(path, colour="white", seed=0)
    for answer in (app.reply(), app.analyse()):
        json.dumps(answer, allow_nan=False)  # raised ValueError: NaN is not JSON
        assert answer["analysis"]["value"] is None
